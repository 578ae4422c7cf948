"""The window's worker feed starts generation once a database locked elsewhere is free."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.models.opening import open_database
from app.ui.qt.worker_feed import WorkerFeed
from tests.engine.workers.worker_fixtures import fake_params, harness
from tests.faults import release, write_lock_held

GHOST = "ghost-host:1:dead"  # a worker of another machine that stopped heartbeating long ago


def test_a_launch_under_a_lock_held_elsewhere_waits_then_starts(
    qtbot: QtBot, tmp_path: Path
) -> None:
    db = open_database(tmp_path / "jobs.db", lock_timeout_s=0.2)  # give up on the lock quickly
    queue = JobQueue(db, clock=lambda: 0.0)
    job_id = queue.submit(fake_params(steps=2))
    queue.claim(GHOST)  # left running long ago by a dead worker: recovery must write
    queue.clock = time.time
    failures: list[str] = []
    with harness(queue, tmp_path / "home") as h:
        supervisor = h.supervisor()
        feed = WorkerFeed(lambda: supervisor)
        feed.failed.connect(failures.append)
        with write_lock_held(Path(db.location)) as holder:
            feed.start(start_pool=True)
            qtbot.waitUntil(lambda: bool(failures), timeout=20_000)
            assert "waits for the job database" in failures[0]
            assert queue.get(job_id).status == JobStatus.PROCESSING  # nothing done half way
            threading.Timer(0.5, release, [holder]).start()
        h.wait_settled(job_id)  # recovered (TIMEOUT, RETRY), then run by the new worker
        feed.stop()
        assert queue.get(job_id).status == JobStatus.SUCCESS
        assert len(failures) == 1  # said once, however many tries it took
    db.dispose()
