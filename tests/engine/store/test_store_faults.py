"""Real worker processes under store faults (issue 10 items 3 and 4, issue 9 item 7).

A lock held longer than any timeout, and a disk that fills up mid-job, must cost time only:
the running job keeps its progress and ends SUCCESS on its first attempt, the worker process
stays the same, and jobs already done are untouched.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.store.opening import OpenFor, open_queue
from app.models.db import LOCK_TIMEOUT_S
from tests.engine.workers.worker_fixtures import (
    FAST_SETTINGS,
    Harness,
    events,
    fake_params,
    harness,
)
from tests.faults import file_digest, fill_disk, small_disk, write_lock_held

S = JobStatus
# The watchdog is not under test here: a heartbeat may be late while the store is blocked.
PATIENT_SETTINGS = replace(FAST_SETTINGS, heartbeat_timeout_s=120.0, max_attempts=10)
# Steps of a job still running when the fault comes (0.1 s each, the fault at step 5): 6 s,
# not the 15 s of 150 steps, which each of these tests waited out again after the fault.
LONG = 60


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path) -> Iterator[Harness]:
    with harness(queue, tmp_path / "home") as h:
        yield h


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_lock_held_past_the_timeout_never_fails_the_running_job(
    h: Harness, queue: JobQueue
) -> None:
    supervisor = h.supervisor(settings=PATIENT_SETTINGS)
    supervisor.start()
    job_id = queue.submit(fake_params("step=0.1", steps=LONG))
    h.wait_progress(job_id, 5)
    [pid] = supervisor.worker_pids()
    with write_lock_held(Path(str(queue.db.path))):
        time.sleep(LOCK_TIMEOUT_S + 2)  # longer than any write used to wait before failing
        stalled_at = queue.get(job_id).progress_step  # reads go on during the lock
    job = h.wait_settled(job_id, timeout=120)
    assert (job.status, job.attempt) == (S.SUCCESS, 1)
    assert events(queue, job_id) == ["SUBMIT", "START", "COMPLETE"]  # no FAIL, no restart
    assert 5 <= stalled_at < LONG
    assert supervisor.worker_pids() == [pid]


def test_a_full_disk_pauses_the_worker_and_leaves_done_jobs_alone(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "4m") as home:
        queue = open_queue(home / "easel.db")
        with harness(queue, home) as h:
            supervisor = h.supervisor(settings=PATIENT_SETTINGS)
            supervisor.start()
            done = h.wait_settled(queue.submit(fake_params(steps=3)))
            assert done.status == S.SUCCESS and done.output_path
            image, history = file_digest(Path(done.output_path)), events(queue, done.id or 0)
            running = queue.submit(fake_params("step=0.1", steps=LONG))
            h.wait_progress(running, 5)
            [pid] = supervisor.worker_pids()
            filler = fill_disk(home)
            time.sleep(3)  # the worker meets the full disk at its next progress write
            assert alive(pid), "the worker died of a full disk"
            filler.unlink()
            job = h.wait_settled(running, timeout=120)
            assert (job.status, job.attempt) == (S.SUCCESS, 1)
            assert events(queue, running) == ["SUBMIT", "START", "COMPLETE"]
            assert supervisor.worker_pids() == [pid]
            assert file_digest(Path(done.output_path)) == image
            assert events(queue, done.id or 0) == history
            # Idle, the write-ahead log is folded back and cut to nothing.
            wal = home / "easel.db-wal"
            h.wait_for(lambda: wal.stat().st_size == 0, timeout=60, what="the WAL to be trimmed")
        queue.db.dispose()


# --- issue 21 item 9: a full disk at a worker's start -----------------------------------------


def worker_log(home: Path) -> str:
    return "".join(log.read_text() for log in sorted((home / "logs").glob("worker*.log")))


def test_the_launch_backup_never_takes_the_last_free_space(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_disk(tmp_path / "disk", "3m") as home:
        database = home / "easel.db"
        queue = open_queue(database)
        queue.submit_many([fake_params(f"number {i} {'x' * 300}") for i in range(1500)])
        queue.db.dispose()
        filler = fill_disk(home)
        os.truncate(filler, filler.stat().st_size - 400_000)  # 400 KB free, as in the issue
        free = shutil.disk_usage(home).free
        assert database.stat().st_size > free  # a backup would not even fit

        with caplog.at_level(logging.WARNING):
            launched = open_queue(database, OpenFor.LAUNCH)
        try:
            journal = sum(Path(f"{database}{end}").stat().st_size for end in ("-wal", "-shm"))
            assert shutil.disk_usage(home).free + journal >= free  # only the open's journal
            assert not (home / "backups").exists()
            [warning] = [r.getMessage() for r in caplog.records if "launch backup" in r.message]
            assert "skipped the launch backup. No room for a backup" in warning
            assert f"the disk holding {home} has 0.4 MB free" in warning
            launched.submit(fake_params("after the launch"))  # the queue still works
        finally:
            launched.db.dispose()


def test_a_worker_waiting_for_disk_space_answers_sigterm_and_says_why_it_waits(
    tmp_path: Path, easel_home: Path
) -> None:
    with small_disk(tmp_path / "disk", "4m") as home:
        queue = open_queue(home / "easel.db")
        with harness(queue, home) as h:
            supervisor = h.supervisor(settings=PATIENT_SETTINGS)
            supervisor.start()
            job_id = queue.submit(fake_params("step=0.1", steps=LONG))
            h.wait_progress(job_id, 5)
            [pid] = supervisor.worker_pids()
            filler = fill_disk(home)
            h.wait_for(
                lambda: "; waiting for space" in worker_log(easel_home), timeout=30,
                what="the worker to say it waits for space",
            )  # fmt: skip
            os.kill(pid, signal.SIGTERM)
            h.wait_for(
                lambda: pid not in supervisor.worker_pids(), timeout=15,
                what="the worker to answer SIGTERM while it waits for space",
            )  # fmt: skip
            filler.unlink()
            job = h.wait_settled(job_id, timeout=120)
            assert job.status == S.SUCCESS  # left as it was, then retried: not lost
        queue.db.dispose()
    said = worker_log(easel_home)
    assert f"job {job_id} is left as it was: the worker stopped while waiting for disk" in said


def test_the_image_goes_where_the_submitter_asked_whichever_worker_runs_it(
    h: Harness, queue: JobQueue, tmp_path: Path
) -> None:
    asked = tmp_path / "asked"
    asked.mkdir()
    h.supervisor().start()  # a GUI's worker: its own outputs folder is home/outputs
    job = h.wait_settled(queue.submit(fake_params(steps=3), output_dir=asked))
    assert job.status == S.SUCCESS and job.output_path
    assert Path(job.output_path).parent == asked and Path(job.output_path).is_file()
    assert not (h.home / "outputs").exists() or not any((h.home / "outputs").iterdir())
