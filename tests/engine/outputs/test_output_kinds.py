"""The output kind decides a job's file name and its rows in the database, through the same
calls for the image kind and for a second kind registered here (`clip_kind`)."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import select

from app.engine.history.favourites import star
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.outputs import registry
from app.engine.outputs.image import IMAGE
from app.engine.outputs.kinds import FileKind, GalleryLook, OutputKind
from app.engine.outputs.png_star import png_is_starred
from app.engine.outputs.registry import UnknownOutputKind, output_of_job, register
from app.engine.store.stored_files import export_output, latest_file, output_bytes
from app.engine.workers.job_run import JobRun
from app.models.tables import JOB_FILE
from tests.engine.outputs.clip_kind import CLIP, make_clip_job, register_clip
from tests.engine.workers.test_job_run import Sent, claim, context
from tests.engine.workers.worker_fixtures import fake_params

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def clip(monkeypatch: pytest.MonkeyPatch) -> OutputKind:
    return register_clip(monkeypatch)


def run_one(queue: JobQueue, home: Path, *, clip_job: bool = False) -> int:
    """Submit one job (of the clip's kind if asked), run it with the scripted runner."""
    job_id = queue.submit(fake_params(steps=1))
    if clip_job:
        make_clip_job(queue, job_id)
    JobRun(context(queue, home, Sent()), claim(queue)).run()
    return job_id


def test_the_kind_names_the_file_and_never_over_one_that_is_there(tmp_path: Path) -> None:
    assert IMAGE.path_in(tmp_path, 42, 7) == tmp_path / "000042-7.png"
    (tmp_path / "000042-7.png").touch()
    (tmp_path / "000042-7-2.png").touch()
    assert IMAGE.path_in(tmp_path, 42, 7) == tmp_path / "000042-7-3.png"
    assert CLIP.path_in(tmp_path, 42, 7) == tmp_path / "000042-7.clip"  # other suffix: free


def test_a_job_s_output_is_named_as_its_kind_says(
    queue: JobQueue, tmp_path: Path, clip: OutputKind
) -> None:
    image_job = run_one(queue, tmp_path)
    clip_job = run_one(queue, tmp_path, clip_job=True)
    assert queue.get(image_job).output_path == str(tmp_path / "outputs" / "000001-7.png")
    assert queue.get(clip_job).output_path == str(tmp_path / "outputs" / "000002-7.clip")
    assert queue.get(clip_job).status == JobStatus.SUCCESS.value


def test_the_kind_decides_the_stored_file_kind_and_image_rows_stay_image(
    queue: JobQueue, tmp_path: Path, clip: OutputKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a shared store (PostgreSQL), where the finished output is copied into job_file.
    monkeypatch.setattr(queue.db.dialect, "shares_files", True)
    image_job = run_one(queue, tmp_path)
    clip_job = run_one(queue, tmp_path, clip_job=True)
    with queue.db.read() as conn:
        stored: dict[int, str] = dict(
            conn.execute(select(JOB_FILE.c.job_id, JOB_FILE.c.kind)).all()
        )
    assert stored == {image_job: "image", clip_job: "clip"}  # "image": the value stored today
    assert latest_file(queue.db, clip_job, IMAGE.file_kind) is None
    clip_row = latest_file(queue.db, clip_job, FileKind("clip"))
    assert clip_row is not None and clip_row.name == "000002-7.clip"
    # Read back through the kind once the local file is gone, and exported under its name.
    clip_path = Path(queue.get(clip_job).output_path or "")
    written = clip_path.read_bytes()
    clip_path.unlink()
    assert output_bytes(queue.db, queue.get(clip_job)) == written
    exported = export_output(queue.db, queue.get(clip_job), tmp_path / "export")
    assert exported.name == "000002-7.clip"


def test_a_job_of_a_kind_this_easel_does_not_make_fails_with_one_sentence(
    queue: JobQueue, tmp_path: Path
) -> None:
    job_id = run_one(queue, tmp_path, clip_job=True)  # the clip kind is not registered here
    job = queue.get(job_id)
    assert job.status == JobStatus.FAILED.value and job.output_path is None
    assert job.error == "no output kind is made by jobs of kind 'clip'"
    with pytest.raises(UnknownOutputKind):
        output_of_job("clip")


@pytest.mark.parametrize(
    ("changes", "clash"),
    [
        ({"name": "image"}, "name"),
        ({"suffix": ".png"}, "suffix .png"),
        ({"file_kind": FileKind("image")}, "stored kind 'image'"),
        ({"job_kinds": ("clip", "upscale")}, "job kind 'upscale'"),
        ({"file_kind": FileKind.CHECKPOINT}, "stored as the checkpoints are"),
    ],
)
def test_a_kind_that_takes_what_another_has_is_refused(
    monkeypatch: pytest.MonkeyPatch, changes: dict[str, object], clash: str
) -> None:
    register_clip(monkeypatch)  # a registry of our own for this test, the image kind in it
    registry.OUTPUT_KINDS.pop("clip")
    with pytest.raises(ValueError, match=clash):
        register(replace(CLIP, **changes))  # type: ignore[arg-type]


def test_a_declaration_says_what_is_wrong_with_it() -> None:
    with pytest.raises(ValueError, match="a suffix starts with a dot"):
        replace(CLIP, suffix="clip")
    with pytest.raises(ValueError, match="type/subtype"):
        replace(CLIP, media_type="clip")
    with pytest.raises(ValueError, match="1 to 16 characters"):
        FileKind("a-kind-name-too-long")
    assert GalleryLook() == IMAGE.gallery  # an image: no badge, in the viewer


def test_the_star_goes_into_the_file_only_for_a_kind_that_records_it(
    queue: JobQueue, tmp_path: Path, clip: OutputKind
) -> None:
    image_job = run_one(queue, tmp_path)
    clip_job = run_one(queue, tmp_path, clip_job=True)
    image_path = Path(queue.get(image_job).output_path or "")
    image_path.write_bytes(_tiny_png())  # the scripted runner's file is no PNG
    clip_path = Path(queue.get(clip_job).output_path or "")
    clip_bytes = clip_path.read_bytes()
    assert star(queue, image_job) == image_path and png_is_starred(image_path)
    assert star(queue, clip_job) is None and clip_path.read_bytes() == clip_bytes
    assert queue.get(clip_job).starred  # the row holds it


def _tiny_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, format="PNG")
    return buffer.getvalue()
