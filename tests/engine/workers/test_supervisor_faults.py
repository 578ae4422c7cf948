"""The app's supervisor outlives a database it cannot write for a while (lock, full disk)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.models.db import Database
from app.models.opening import open_database
from tests.engine.workers.worker_fixtures import Harness, fake_params, harness, statuses
from tests.faults import write_lock_held


@pytest.fixture
def db(db_location: str) -> Iterator[Database]:
    """The app's store, giving up on a held write lock after 2 s instead of 10: the same
    give-up path, 8 s sooner."""
    database = open_database(db_location, lock_timeout_s=2.0)
    yield database
    database.dispose()


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path) -> Iterator[Harness]:
    with harness(queue, tmp_path / "home") as h:
        yield h


def test_a_worker_lost_while_another_program_holds_the_lock_is_settled_afterwards(
    h: Harness, queue: JobQueue
) -> None:
    supervisor = h.supervisor()
    supervisor.start()
    job_id = queue.submit(fake_params("step=0.1", steps=40))  # runs again after the TIMEOUT
    h.wait_progress(job_id, 2)
    [pid] = supervisor.worker_pids()
    with write_lock_held(Path(queue.db.location)):
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)  # the kill lands; the next poll reaps the worker
        supervisor.poll()  # settling the lost job waits for the lock (2 s), then gives up
        assert queue.get(job_id).status == JobStatus.PROCESSING  # nothing half done
    job = h.wait_settled(job_id)
    assert job.status == JobStatus.SUCCESS
    assert statuses(queue, job_id)[:4] == ["PENDING", "PROCESSING", "TIMEOUT", "PENDING"]
