"""A peer on a shared PostgreSQL queue writes rows, not this machine's files: a file name or
path read from the database that points outside this machine's outputs and checkpoints
folders is refused or ignored, never read, written, moved or removed; the job is left in a
known state. This machine's own SQLite store keeps trusting its user's rows."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import update

from app.cli import main
from app.engine import paths
from app.engine.history.favourites import star
from app.engine.history.retention import delete_jobs
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.paths import OutsideItsFolder
from app.engine.store.opening import open_queue
from app.engine.store.stored_files import output_bytes, output_file
from app.engine.workers.job_run import JobRun
from app.models.tables import JOB, JOB_FILE
from app.testing.scripted_runner import fake_image
from tests import pg
from tests.engine.workers.test_job_run import Sent, claim, context
from tests.engine.workers.worker_fixtures import fake_params

S = JobStatus
SECRET = b"the artist's private notes"


@pytest.fixture
def pg_queue() -> Iterator[JobQueue]:
    """A shared queue: a fresh PostgreSQL schema, with the app's listeners (cleanup)."""
    with pg.fresh_schema() as url:
        queue = open_queue(url)
        yield queue
        queue.db.dispose()


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside every folder of this machine's, that a peer's row could name."""
    path = tmp_path / "private" / "notes.txt"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    return path


def finished_elsewhere(queue: JobQueue, machine: Path) -> int:
    """A job run to its image on another machine (its disk then gone): the image is only in
    the database."""
    job_id = queue.submit(fake_params(steps=2))
    JobRun(context(queue, machine, Sent()), claim(queue)).run()
    Path(queue.get(job_id).output_path or "").unlink()
    return job_id


def write_row(queue: JobQueue, job_id: int, **values: object) -> None:
    """What a peer with the database's password can do: write any column."""
    with queue.db.write() as conn:
        conn.execute(update(JOB).where(JOB.c.id == job_id).values(**values))


@pytest.mark.parametrize("name", ["../../climbed.png", "{root}/absolute.png", "sub/x.png", ".."])
def test_a_stored_file_name_that_leaves_the_fetched_folder_is_refused(
    pg_queue: JobQueue,
    tmp_path: Path,
    name: str,
) -> None:
    job_id = finished_elsewhere(pg_queue, tmp_path / "b")
    name = name.format(root=tmp_path)
    with pg_queue.db.write() as conn:
        conn.execute(update(JOB_FILE).where(JOB_FILE.c.job_id == job_id).values(name=name))
    outputs = tmp_path / "c" / "outputs"
    with pytest.raises(OutsideItsFolder) as refused:
        output_file(pg_queue.db, pg_queue.get(job_id), outputs)
    assert str(refused.value) == (
        f"job {job_id}'s image in the job database is named {name!r}, which is not a plain "
        "file name; it was not written here"
    )
    written = [
        p for p in tmp_path.rglob("*") if p.is_file() and not p.is_relative_to(tmp_path / "b")
    ]
    assert written == []  # nothing written anywhere but in machine b's own folders
    assert pg_queue.get(job_id).status == S.SUCCESS  # the job is as it was
    # The bytes themselves are no path: the API still serves them.
    assert output_bytes(pg_queue.db, pg_queue.get(job_id)) == fake_image(fake_params(steps=2))


def test_a_peer_row_naming_a_file_outside_is_never_read_written_or_removed(
    pg_queue: JobQueue,
    tmp_path: Path,
    secret: Path,
) -> None:
    job_id = finished_elsewhere(pg_queue, tmp_path / "b")
    write_row(pg_queue, job_id, output_path=str(secret), checkpoint_path=str(secret))
    job = pg_queue.get(job_id)
    # Read: the API's image is the database's copy, never the file the row names.
    assert output_bytes(pg_queue.db, job) == fake_image(fake_params(steps=2))
    fetched = output_file(pg_queue.db, job, tmp_path / "c" / "outputs")
    assert fetched is not None and fetched.read_bytes() != SECRET
    # Written: a star goes into the image file only inside this machine's outputs folder.
    assert star(pg_queue, job_id) is None and star(pg_queue, job_id, on=False) is None
    # Removed: deleting the job (images too) removes no file outside this machine's folders.
    report = delete_jobs(pg_queue, [job_id], checkpoints_dir=tmp_path / "c" / "checkpoints")
    assert report.removed == [job_id]
    assert secret.read_bytes() == SECRET


def test_a_peer_row_naming_a_checkpoint_outside_is_neither_moved_nor_removed(
    pg_queue: JobQueue,
    tmp_path: Path,
    secret: Path,
) -> None:
    """A paused job's row names the progress to adopt: a worker moved that file into its
    checkpoints folder, and a cancel removed it, wherever it was."""
    job_id = pg_queue.submit(fake_params(steps=2))
    pg_queue.pause(job_id)
    write_row(pg_queue, job_id, checkpoint_path=str(secret))
    pg_queue.resume(job_id)
    JobRun(context(pg_queue, tmp_path / "b", Sent()), claim(pg_queue)).run()
    assert pg_queue.get(job_id).status == S.SUCCESS
    assert secret.read_bytes() == SECRET
    other = pg_queue.submit(fake_params(steps=2))
    write_row(pg_queue, other, checkpoint_path=str(secret))
    pg_queue.cancel(other)  # the app's cleaner removes a cancelled job's checkpoint
    assert secret.read_bytes() == SECRET


def test_a_peer_row_asking_for_an_image_folder_outside_fails_the_job_writing_nothing(
    pg_queue: JobQueue,
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    job_id = pg_queue.submit(fake_params(steps=2), output_dir=elsewhere)
    JobRun(context(pg_queue, tmp_path / "b", Sent()), claim(pg_queue)).run()
    job = pg_queue.get(job_id)
    assert job.status == S.FAILED and not job.error_transient
    assert job.error == (
        f"job {job_id} asks for its image in {str(elsewhere)!r}, outside this machine's "
        "outputs folder; a job on a shared queue writes only there"
    )
    assert not elsewhere.exists()


def test_a_peer_row_naming_a_model_by_path_fails_the_job(
    pg_queue: JobQueue,
    tmp_path: Path,
) -> None:
    job_id = pg_queue.submit(GenerationParams("a cat", steps=2))
    write_row(pg_queue, job_id, model="/etc/passwd")
    JobRun(context(pg_queue, tmp_path / "b", Sent()), claim(pg_queue)).run()
    job = pg_queue.get(job_id)
    assert job.status == S.FAILED and not job.error_transient
    assert job.error == (
        "model '/etc/passwd' is not one of the installed models; GET /api/v1/models lists them"
    )


def test_this_machines_own_store_keeps_its_users_folders(queue: JobQueue, tmp_path: Path) -> None:
    """On SQLite only this machine's user writes rows: an image folder of their choosing
    (`submit --out`) is where the image goes."""
    chosen = tmp_path / "chosen"
    job_id = queue.submit(fake_params(steps=2), output_dir=chosen)
    JobRun(context(queue, tmp_path / "b", Sent()), claim(queue)).run()
    job = queue.get(job_id)
    assert job.status == S.SUCCESS and Path(job.output_path or "").parent == chosen
    assert output_bytes(queue.db, job) == fake_image(fake_params(steps=2))
    assert paths.data_dir() not in Path(job.output_path or "").parents


def test_outpaint_from_the_command_line_reads_the_image_from_the_queue_not_a_peers_path(
    pg_queue: JobQueue, tmp_path: Path, secret: Path
) -> None:
    """`outpaint N` stores job N's image as the new job's init image: from a peer's row
    naming a private file, it would have sent that file into the shared queue."""
    job_id = finished_elsewhere(pg_queue, tmp_path / "b")
    picture = io.BytesIO()
    Image.new("RGB", (64, 64), "red").save(picture, format="PNG")
    png = picture.getvalue()
    with pg_queue.db.write() as conn:  # the scripted runner's image is no picture: make it one
        conn.execute(
            update(JOB_FILE).where(JOB_FILE.c.job_id == job_id)
            .values(data=png, sha256=hashlib.sha256(png).hexdigest(), size=len(png))
        )  # fmt: skip
    write_row(pg_queue, job_id, output_path=str(secret), model="easel-tiny", width=64, height=64)
    argv = ["--db", pg_queue.db.location, "--home", str(tmp_path / "c")]
    assert main([*argv, "outpaint", str(job_id), "--left", "8"]) == 0
