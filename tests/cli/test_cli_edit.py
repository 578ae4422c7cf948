"""Edit with words from the command line: `edit N "instruction"` queues a child of job N
that edits its image on a model that edits (Flux.1 Kontext), `submit --edit-image` an edit
of a picture stored with its job; an edit on a model that cannot edit is refused in one
sentence with nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine import paths
from app.engine.jobs.graph import edit_images_of, init_image_of, parents_of, run_inputs_of
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.init_image import open_rgb
from app.engine.jobs.queue import JobNotFound, params_of
from app.engine.store.opening import open_queue
from tests.edit_models import write_kontext_index, write_qwen_edit_index

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


def test_a_qwen_image_edit_runs_with_its_own_defaults_unless_told(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """QwenImageEditPipeline's 50 steps and true_cfg_scale 4, not Kontext's 28 and 3.5."""
    write_qwen_edit_index(paths.models_dir() / "qwen-edit")
    assert run_cli(capsys, "submit", "a cat", "--seed", "3")[1].strip() == "1"
    assert run_cli(capsys, "edit", "1", "make it night", "--model", "qwen-edit")[0] == 0
    told = ("--model", "qwen-edit", "--steps", "8", "--cfg", "2.5")
    assert run_cli(capsys, "edit", "1", "make it snow", *told)[0] == 0
    picture = write_image(tmp_path / "in.png", (64, 48))
    edit_image = ("--edit-image", str(picture), "--model", "qwen-edit")
    assert run_cli(capsys, "submit", "make it rain", *edit_image)[0] == 0
    assert run_cli(capsys, "submit", "a dog")[0] == 0  # a drawing: submit's own defaults
    queue = open_queue()
    assert (queue.get(2).steps, queue.get(2).cfg) == (50, 4.0)
    assert (queue.get(3).steps, queue.get(3).cfg) == (8, 2.5)
    assert (queue.get(4).steps, queue.get(4).cfg) == (50, 4.0)
    assert (queue.get(5).steps, queue.get(5).cfg) == (20, 4.0)
    queue.db.dispose()


def test_edit_plus_takes_further_input_images_in_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_qwen_edit_index(paths.models_dir() / "plus", plus=True)
    pictures = [write_image(tmp_path / f"{n}.png", (64, 48 + 8 * n)) for n in range(3)]
    assert run_cli(capsys, "submit", "a cat", "--seed", "3")[1].strip() == "1"
    code, out, err = run_cli(
        capsys, "edit", "1", "put the hat of picture 2 on the cat", "--model", "plus",
        "--image", str(pictures[1]), "--image", str(pictures[2]),
    )  # fmt: skip
    assert (code, err, out.strip()) == (0, "", "2")
    code, out, err = run_cli(
        capsys, "submit", "the two cats together", "--model", "plus",
        "--edit-image", str(pictures[0]), "--edit-image", str(pictures[1]),
    )  # fmt: skip
    assert (code, err, out.strip()) == (0, "", "3")
    queue = open_queue()
    child = queue.get(2)
    stored = edit_images_of(queue, child)
    assert [open_rgb(png).size for png in stored] == [(64, 56), (64, 64)]
    assert params_of(child).more_edit_images == tuple(digest(png) for png in stored)
    assert (child.init_image, parents_of(queue, 2)) == ("job:1", [1])
    pair = queue.get(3)
    assert init_image_of(queue, pair) is not None
    assert [open_rgb(png).size for png in edit_images_of(queue, pair)] == [(64, 56)]
    handed = run_inputs_of(queue, pair).edit_images  # what a worker is handed
    assert handed == edit_images_of(queue, pair)
    queue.cancel(3)
    again = queue.get(queue.rerun(3))  # a re-run stores the same pictures again
    assert (again.edit_images, edit_images_of(queue, again)) == (pair.edit_images, handed)
    queue.db.dispose()


@pytest.mark.parametrize(
    ("model", "images", "sentence"),
    [
        ("plus", 3, "an edit reads at most 3 input images, not 4"),
        ("kontext", 1, "Flux.1 Kontext edits one input image, not 2; give only the picture"),
        ("qwen-edit", 1, "Qwen-Image-Edit edits one input image, not 2; give only the picture"),
        ("plus", 0, "small.png) is 24x24; each side must be at least 32 pixels"),
    ],
)
def test_too_many_input_images_are_refused_in_one_sentence_and_nothing_is_stored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model: str, images: int, sentence: str
) -> None:
    write_qwen_edit_index(paths.models_dir() / "plus", plus=True)
    write_qwen_edit_index(paths.models_dir() / "qwen-edit")
    write_kontext_index(paths.models_dir() / "kontext")
    assert run_cli(capsys, "submit", "a cat")[1].strip() == "1"
    more = [write_image(tmp_path / f"{n}.png", (64, 48)) for n in range(images)]
    more = more or [write_image(tmp_path / "small.png", (24, 24))]  # one too small
    flags = [argument for path in more for argument in ("--image", str(path))]
    code, out, err = run_cli(capsys, "edit", "1", "make it night", "--model", model, *flags)
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert sentence in err
    with pytest.raises(JobNotFound):  # nothing stored
        open_queue().get(2)


@pytest.mark.parametrize(
    ("command", "number"), [("edit", 3), ("submit", 2)]
)  # fmt: skip
def test_a_further_picture_that_cannot_be_read_is_refused_naming_its_number_and_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, number: int
) -> None:
    """A missing file, a text file: "input image N (path) ...", not "the init image"."""
    write_qwen_edit_index(paths.models_dir() / "plus", plus=True)
    assert run_cli(capsys, "submit", "a cat")[1].strip() == "1"
    good = write_image(tmp_path / "good.png", (64, 48))
    notes, missing = tmp_path / "notes.txt", tmp_path / "missing.png"
    notes.write_text("not a picture")
    flag = "--image" if command == "edit" else "--edit-image"
    head = ["edit", "1", "make it night"] if command == "edit" else ["submit", "make it night"]
    for bad, said in [
        (missing, f"cannot read input image {number} ({missing}): "),
        (notes, f"input image {number} ({notes}) is not an image that can be read: "),
    ]:  # fmt: skip
        code, out, err = run_cli(
            capsys, *head, "--model", "plus", flag, str(good), flag, str(bad)
        )  # fmt: skip
        assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
        assert said in err and "init image" not in err
    with pytest.raises(JobNotFound):  # nothing stored
        open_queue().get(2)
