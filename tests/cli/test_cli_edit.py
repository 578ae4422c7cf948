"""Edit with words from the command line: `edit N "instruction"` queues a child of job N
that edits its image on a model that edits (Flux.1 Kontext), `submit --edit-image` an edit
of a picture stored with its job; an edit on a model that cannot edit is refused in one
sentence with nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine import paths
from app.engine.jobs.graph import init_image_of, parents_of
from app.engine.jobs.queue import JobNotFound
from app.engine.store.opening import open_queue
from tests.edit_models import write_kontext_index

from .test_cli_graph import write_image
from .test_cli_jobs import run_cli


def test_an_edit_is_a_child_of_the_job_it_edits_and_a_picture_is_stored_with_its_edit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_kontext_index(paths.models_dir() / "kontext")  # submit reads no weights
    assert run_cli(capsys, "submit", "a cat", "--seed", "3")[1].strip() == "1"
    code, out, err = run_cli(capsys, "edit", "1", "make it night", "--model", "kontext")
    assert (code, err, out.strip()) == (0, "", "2")
    queue = open_queue()
    child = queue.get(2)
    assert (child.kind, child.init_image, child.prompt) == ("edit", "job:1", "make it night")
    assert (child.steps, child.cfg, child.model) == (28, 3.5, "kontext")  # stock defaults
    assert parents_of(queue, 2) == [1]
    picture = write_image(tmp_path / "in.png", (64, 48))
    code, out, err = run_cli(
        capsys, "submit", "make it snow", "--edit-image", str(picture), "--model", "kontext",
        "--size", "64x48",
    )  # fmt: skip
    assert (code, err) == (0, "")
    picture.unlink()  # the job depends on the file no more
    edit = queue.get(int(out.strip()))
    assert edit.kind == "edit" and edit.init_image.startswith("upload:")
    assert init_image_of(queue, edit) is not None
    queue.db.dispose()


def test_an_edit_on_a_model_that_cannot_edit_is_refused_in_one_sentence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(capsys, "submit", "a cat")[1].strip() == "1"
    code, out, err = run_cli(capsys, "edit", "1", "make it night")  # the job's SD model
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert "cannot follow an instruction to edit an image" in err
    with pytest.raises(JobNotFound):  # nothing stored
        open_queue().get(2)
