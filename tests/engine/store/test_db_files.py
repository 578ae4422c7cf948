"""No shared disk (issue 14 item 4): images and checkpoints travel through PostgreSQL.

Each "machine" is a data folder of its own (outputs, checkpoints); what one makes reaches
another only through the database. In-process runs use the scripted runner; the move of a
paused job between real worker processes uses the real tiny pipeline.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select, update

from app.cli import main
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.outputs.image import IMAGE
from app.engine.outputs.kinds import FileKind
from app.engine.store.opening import open_queue
from app.engine.store.stored_files import LIMIT_ENV, latest_file, store_file
from app.engine.workers.job_run import JobRun
from app.engine.workers.supervisor import Supervisor
from app.models.tables import JOB_FILE
from app.testing.scripted_runner import fake_image
from tests import pg
from tests.engine.conftest import TINY_MODEL
from tests.engine.workers.test_job_run import OTHER, WORKER, Sent, claim, context
from tests.engine.workers.test_worker_e2e import pixels
from tests.engine.workers.worker_fixtures import (
    fake_params,
    harness,
    link_model,
    slow_tiny_runner,
    worker_config,
)

S = JobStatus


def max_pixel_diff(first: bytes, second: bytes) -> int:
    assert len(first) == len(second)
    return max(abs(a - b) for a, b in zip(first, second, strict=True))


@pytest.fixture
def pg_queue() -> Iterator[JobQueue]:
    """The queue on a fresh PostgreSQL schema, with the app's listeners (cleanup)."""
    with pg.fresh_schema() as url:
        queue = open_queue(url)
        yield queue
        queue.db.dispose()


def pause_at(queue: JobQueue, home: Path, step: int, worker_id: str = WORKER) -> int:
    """Run a job on the machine `home` and pause it at `step`; its id. The machine's folder
    is then out of reach (removed): what it saved lives on only in the database."""
    job_id = queue.submit(fake_params(steps=6))
    sent = Sent(at_step={step: lambda: queue.pause(job_id)})
    JobRun(context(queue, home, sent, worker_id=worker_id), claim(queue, worker_id)).run()
    assert queue.get(job_id).status == S.PAUSED
    assert list(home.glob("checkpoints/*.ckpt"))
    shutil.rmtree(home)
    return job_id


def resume_elsewhere(queue: JobQueue, job_id: int, home: Path) -> Sent:
    """Resume the job and run it to the end on the machine `home`, as another worker."""
    queue.resume(job_id)
    sent = Sent()
    JobRun(context(queue, home, sent, worker_id=OTHER), claim(queue, OTHER)).run()
    return sent


def test_a_job_paused_on_one_machine_resumes_on_another_from_the_database(
    pg_queue: JobQueue, tmp_path: Path
) -> None:
    job_id = pause_at(pg_queue, tmp_path / "a", step=3)
    assert not list((tmp_path / "b").glob("**/*.ckpt"))
    sent = resume_elsewhere(pg_queue, job_id, tmp_path / "b")
    assert sent.steps() == [4, 5, 6]  # continued where machine A paused
    job = pg_queue.get(job_id)
    assert job.status == S.SUCCESS
    assert "came from the database" in pg_queue.timeline(job_id)[-1].message
    # The image is in the database; the checkpoint rows went with the finished image.
    image = latest_file(pg_queue.db, job_id, IMAGE.file_kind)
    assert image is not None and image.data == fake_image(fake_params(steps=6))
    assert latest_file(pg_queue.db, job_id, FileKind.CHECKPOINT) is None


def test_a_damaged_checkpoint_row_is_set_aside_and_the_job_starts_over(
    pg_queue: JobQueue, tmp_path: Path
) -> None:
    job_id = pause_at(pg_queue, tmp_path / "a", step=3)
    with pg_queue.db.write() as conn:
        conn.execute(update(JOB_FILE).values(data=b'{"step": 5}'))  # the checksum no longer holds
    sent = resume_elsewhere(pg_queue, job_id, tmp_path / "b")
    assert sent.steps() == [1, 2, 3, 4, 5, 6]  # started over: never resumed from the damage
    assert pg_queue.get(job_id).status == S.SUCCESS
    assert "damaged" in pg_queue.timeline(job_id)[-1].message
    with pg_queue.db.read() as conn:
        kept = conn.execute(
            select(JOB_FILE.c.kind, JOB_FILE.c.set_aside_at).where(JOB_FILE.c.job_id == job_id)
        ).all()
    assert [(kind, at is not None) for kind, at in kept] == [
        ("checkpoint", True),  # kept as evidence, never read again
        ("image", False),
    ]


def test_an_image_over_the_limit_is_refused_with_a_message_and_the_job_keeps_its_file(
    pg_queue: JobQueue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LIMIT_ENV, "0.00001")  # 10 bytes
    job_id = pg_queue.submit(fake_params(steps=2))
    JobRun(context(pg_queue, tmp_path, Sent()), claim(pg_queue)).run()
    job = pg_queue.get(job_id)
    assert job.status == S.SUCCESS
    assert Path(job.output_path or "").read_bytes() == fake_image(fake_params(steps=2))
    message = pg_queue.timeline(job_id)[-1].message
    assert (
        "over the job database's limit of 0.0 MB" in message and "only on this machine" in message
    )
    assert latest_file(pg_queue.db, job_id, IMAGE.file_kind) is None


def test_a_checkpoint_over_the_limit_stays_here_and_the_pause_says_so(
    pg_queue: JobQueue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LIMIT_ENV, "0.000001")  # 1 byte
    job_id = pg_queue.submit(fake_params(steps=6))
    sent = Sent(at_step={2: lambda: pg_queue.pause(job_id)})
    JobRun(context(pg_queue, tmp_path, sent), claim(pg_queue)).run()
    job = pg_queue.get(job_id)
    assert job.status == S.PAUSED and Path(job.checkpoint_path or "").is_file()
    assert "the saved progress can resume only here" in pg_queue.timeline(job_id)[-1].message
    assert latest_file(pg_queue.db, job_id, FileKind.CHECKPOINT) is None


def test_a_worker_that_no_longer_holds_the_job_writes_no_file(
    pg_queue: JobQueue, tmp_path: Path
) -> None:
    job_id = pg_queue.submit(fake_params())
    job = claim(pg_queue)
    pg_queue.pause(job_id)
    pg_queue.fire(job_id, JobEvent.STOPPED, source="test", worker_id=WORKER)
    stale = tmp_path / "job.ckpt"
    stale.write_bytes(b"late")
    assert not store_file(
        pg_queue.db, job, FileKind.CHECKPOINT, stale, worker_id=WORKER, claim=job.version
    )
    assert latest_file(pg_queue.db, job_id, FileKind.CHECKPOINT) is None


def test_cancelling_a_paused_job_removes_its_checkpoint_from_the_database(
    pg_queue: JobQueue, tmp_path: Path
) -> None:
    job_id = pause_at(pg_queue, tmp_path / "a", step=2)
    assert latest_file(pg_queue.db, job_id, FileKind.CHECKPOINT) is not None
    pg_queue.cancel(job_id)
    assert latest_file(pg_queue.db, job_id, FileKind.CHECKPOINT) is None


def test_export_writes_an_image_made_on_another_machine(
    pg_queue: JobQueue, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = pg_queue.submit(fake_params(steps=2))
    JobRun(context(pg_queue, tmp_path / "b", Sent()), claim(pg_queue)).run()
    made = Path(pg_queue.get(job_id).output_path or "")
    made.unlink()  # machine B's disk is not this machine's
    out = tmp_path / "exported"
    argv = ["--db", pg_queue.db.location, "--home", str(tmp_path / "c")]
    assert main([*argv, "export", str(job_id), "--out", str(out)]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed == out / made.name
    assert printed.read_bytes() == fake_image(fake_params(steps=2))


def test_export_of_a_job_without_an_image_is_one_clear_line(
    queue: JobQueue, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = queue.submit(fake_params())
    code = main(["--db", queue.db.location, "export", str(job_id), "--out", str(tmp_path)])
    assert code == 2
    assert capsys.readouterr().err == f"error: Job {job_id} has no image: it is PENDING\n"
    assert not list(tmp_path.glob("*.png"))


# --- real worker processes, the real tiny pipeline -------------------------------------------


@pytest.mark.slow
def test_a_job_paused_on_worker_a_resumes_on_worker_b_with_no_shared_folder_to_the_same_image(
    pg_queue: JobQueue, tmp_path: Path, tiny_model_dir: Path, easel_home: Path
) -> None:
    link_model(tiny_model_dir, easel_home)
    params = GenerationParams("a red circle", model=TINY_MODEL, steps=12, width=32, height=32)
    params = replace(params, seed=5)
    with harness(pg_queue, tmp_path / "a") as h:

        def machine(home: Path, name: str) -> Supervisor:
            config = worker_config(
                pg_queue, home, runner_factory=slow_tiny_runner, warm_model=TINY_MODEL
            )
            return h.supervisor(config=replace(config, torch_threads=1, name=name))

        a = machine(tmp_path / "a", "machine-a")
        a.start()
        reference = h.wait_settled(pg_queue.submit(params), timeout=120)
        job_id = pg_queue.submit(params)
        h.wait_progress(job_id, 3)
        pg_queue.pause(job_id)
        paused = h.wait_status(job_id, S.PAUSED)
        a.shutdown(timeout=10)
        h.supervisors.remove(a)
        # Machine A's disk is out of reach from here on: its folder is gone.
        assert paused.checkpoint_path and Path(paused.checkpoint_path).is_file()
        reference_pixels = pixels(reference.output_path)
        shutil.rmtree(tmp_path / "a")

        machine(tmp_path / "b", "machine-b").start()
        pg_queue.resume(job_id)
        job = h.wait_settled(job_id, timeout=120)
    assert job.status == S.SUCCESS
    assert (tmp_path / "b") in Path(job.output_path or "").parents
    message = pg_queue.timeline(job_id)[-1].message
    assert "came from the database" in message and "resumed from step" in message
    assert max_pixel_diff(pixels(job.output_path), reference_pixels) == 0


def test_db_copy_takes_this_machines_images_and_pause_checkpoints_along(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = open_queue()  # this machine's SQLite queue
    done = local.submit(fake_params(steps=2))
    JobRun(context(local, tmp_path, Sent()), claim(local)).run()
    paused = local.submit(fake_params(steps=6))
    sent = Sent(at_step={2: lambda: local.pause(paused)})
    JobRun(context(local, tmp_path, sent), claim(local)).run()
    checkpoint = Path(local.get(paused).checkpoint_path or "")
    local.db.dispose()
    with pg.fresh_schema() as url:
        assert main(["db", "copy", "--to", url]) == 0
        assert "and 2 images and checkpoints" in capsys.readouterr().out
        shared = open_queue(url)
        try:
            image = latest_file(shared.db, done, IMAGE.file_kind)
            saved = latest_file(shared.db, paused, FileKind.CHECKPOINT)
        finally:
            shared.db.dispose()
    assert image is not None and image.data == fake_image(fake_params(steps=2))
    assert saved is not None and saved.data == checkpoint.read_bytes() and saved.intact
    assert saved.claim == 1  # the claim named in the file: a later claim finds it newer
