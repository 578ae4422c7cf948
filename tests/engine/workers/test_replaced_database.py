"""The database file deleted or replaced under a running worker (issue 21 item 4).

Real worker processes on real SQLite files: the file at the worker's path is deleted, or
another file is moved over it, while a job runs. The worker must notice, say so once, and
stop writing; the job stays as it was in the file it had open (here kept reachable through
a hard link, as a set-aside copy or a restore keeps it).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.store.opening import open_queue
from app.engine.workers.database_watch import DatabaseFileReplaced, DatabaseFileWatch
from app.engine.workers.job_run import JobRun, RunContext
from app.engine.workers.presence import Presence
from app.engine.workers.worker_states import WorkerState
from app.models.opening import open_database
from app.testing.scripted_runner import ScriptedRunner, fake_image
from tests.engine.workers.worker_fixtures import fake_params, harness


@pytest.fixture
def home_db(tmp_path: Path) -> Iterator[JobQueue]:
    queue = open_queue(tmp_path / "data" / "easel.db")
    yield queue
    queue.db.dispose()


def job_row(path: Path, job_id: int) -> tuple[str, int]:
    """(status, progress step) as stored in the file at `path`, read with plain sqlite3."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT status, progress_step FROM job WHERE id = ?", (job_id,))
        status, step = row.fetchone()
        return str(status), int(step)
    finally:
        conn.close()


def worker_log(home: Path) -> str:
    return "".join(log.read_text() for log in sorted((home / "logs").glob("worker*.log")))


def take_the_file_away(path: Path, kept: Path, how: str, tmp_path: Path) -> None:
    """Move the database (and its journal files) to `kept`: to the worker, whose open files
    they stay, its path was emptied; "replaced" then puts another database there."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").replace(f"{kept}{suffix}")
    if how == "replaced":  # an empty queue, as a copy or a restore would put there
        other = tmp_path / "another.db"
        open_database(other).dispose()
        other.replace(path)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_worker_stops_writing_once_its_database_file_is_deleted_or_replaced(
    how: str, home_db: JobQueue, tmp_path: Path, easel_home: Path
) -> None:
    path = Path(str(home_db.db.path))
    kept = tmp_path / "kept.db"  # the worker's file, still open there once taken away
    with harness(home_db, tmp_path / "home") as h:
        supervisor = h.supervisor(presence_interval_s=0.2)
        supervisor.start()
        job_id = home_db.submit(fake_params("step=0.2", steps=150))
        h.wait_progress(job_id, 3)
        take_the_file_away(path, kept, how, tmp_path)

        h.wait_for(lambda: supervisor.worker_pids() == [], timeout=30, what="the worker to stop")
        status, step = job_row(kept, job_id)
        time.sleep(1.0)  # a worker still writing would show it by then
        assert job_row(kept, job_id)[1] == step  # no progress written after it stopped
        assert step < 150 and status != "SUCCESS"
        assert supervisor.worker_pids() == []  # nobody started in its place
    told = [line for line in worker_log(easel_home).splitlines() if f"{path} was {how}" in line]
    assert len(told) == 1 and "stopped and writes nothing more" in told[0], told
    assert not any((tmp_path / "home" / "outputs").glob("*.png"))  # no image of the job


def test_the_watch_tells_a_moved_over_file_from_the_one_opened(tmp_path: Path) -> None:
    path = tmp_path / "easel.db"
    path.write_bytes(b"one")
    watch = DatabaseFileWatch(path)
    assert watch.problem() is None
    path.write_bytes(b"the same file, written to")  # same inode: still the one opened
    assert watch.problem() is None
    (tmp_path / "other").write_bytes(b"two")
    (tmp_path / "other").replace(path)
    problem = watch.problem()
    assert problem is not None and "was replaced by another file" in str(problem)
    path.unlink()
    problem = watch.problem()
    assert problem is not None and "was deleted" in str(problem)


def run_first_job(database: Path, home: Path, params: GenerationParams) -> Path:
    """Job 1 of a new database at `database`, run to its image in `home`/outputs."""
    queue = open_queue(database)
    try:
        assert queue.submit(params) == 1  # ids start again in every new database
        job = queue.claim("worker-a")
        assert job is not None
        context = RunContext(
            queue=queue, worker_id="worker-a", runner=ScriptedRunner(),
            outputs_dir=home / "outputs", checkpoints_dir=home / "checkpoints",
            send=lambda *_args, **_fields: None, pause_requested=lambda: None,
        )  # fmt: skip
        JobRun(context, job).run()
        done = queue.get(1)
        assert done.status == JobStatus.SUCCESS
        return Path(done.output_path or "")
    finally:
        queue.db.dispose()


def test_a_new_database_never_writes_over_an_old_ones_images(tmp_path: Path) -> None:
    """The issue's case: the database deleted, a new job 1 with the same seed."""
    home = tmp_path / "home"
    lighthouse, cat = fake_params("a lighthouse", seed=1), fake_params("a cat", seed=1)
    first = run_first_job(tmp_path / "easel.db", home, lighthouse)
    (tmp_path / "easel.db").unlink()
    second = run_first_job(tmp_path / "easel.db", home, cat)
    third = run_first_job(tmp_path / "other.db", home, cat)

    assert [first.name, second.name, third.name] == [
        "000001-1.png", "000001-1-2.png", "000001-1-3.png"
    ]  # fmt: skip
    assert first.read_bytes() == fake_image(lighthouse)  # the old job's image, untouched
    assert second.read_bytes() == third.read_bytes() == fake_image(cat)


def test_once_the_file_is_known_replaced_the_rows_beat_is_refused_without_a_word(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker says once that its file is gone (`Worker.database_replaced`); its row's
    beat, on a thread of its own, must not say it again at its next beat."""
    db = open_database(tmp_path / "easel.db")
    presence = Presence(db, "laptop:1:cafe", "laptop")
    presence.register(device=None)
    db.refusal = DatabaseFileReplaced("The job database was replaced", tmp_path / "easel.db")
    try:
        with caplog.at_level(logging.WARNING):
            assert presence.beat(WorkerState.BUSY) is None
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    finally:
        db.dispose()
