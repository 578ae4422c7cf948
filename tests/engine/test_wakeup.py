"""LISTEN/NOTIFY: on PostgreSQL an idle worker is woken by new work, not by its poll."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.queue import JobQueue
from app.engine.states import JobStatus
from app.engine.wakeup import DatabaseWakeup, wakeup_for
from app.engine.worker import Outbox, Worker
from app.models.db import Database, open_database
from app.models.postgres import JobListener
from app.testing.scripted_runner import ScriptedRunner
from tests import pg
from tests.engine.worker_fixtures import WAIT_S, fake_params, worker_config

NEVER_S = 600.0  # a poll interval no test waits out: only a wake-up can explain a quick claim


@pytest.fixture
def db() -> Iterator[Database]:
    """PostgreSQL only: SQLite has no wake-ups, its workers poll one local file."""
    with pg.fresh_schema() as url:
        database = open_database(url)
        yield database
        database.dispose()


def test_work_for_workers_is_announced_and_claims_are_not(db: Database) -> None:
    queue = JobQueue(db)
    listener = JobListener(open_database(db.location))
    try:
        assert listener.wait(0.1) == []  # LISTEN is in place before anything is sent
        job_id = queue.submit(fake_params())
        assert listener.wait(5.0) == [f"{job_id} PENDING"]
        assert queue.claim("w1") is not None
        assert listener.wait(0.5) == []
        queue.cancel(job_id)
        assert listener.wait(5.0) == [f"{job_id} CANCELLING"]
    finally:
        listener.close()


def test_an_idle_worker_is_woken_by_a_new_job_long_before_its_poll(
    db: Database, tmp_path: Path
) -> None:
    queue = JobQueue(db)
    config = replace(worker_config(queue, tmp_path), idle_poll_s=NEVER_S)
    worker_db = open_database(db.location)
    wakeup = wakeup_for(worker_db)
    assert isinstance(wakeup, DatabaseWakeup)
    stop = threading.Event()
    worker = Worker(
        config, JobQueue(worker_db), ScriptedRunner(), "w1", Outbox(None),
        stop_event=stop, wakeup=wakeup,
    )  # fmt: skip
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        time.sleep(0.5)  # the worker found nothing and went idle
        job_id = queue.submit(fake_params(steps=2))
        deadline = time.monotonic() + WAIT_S
        while queue.get(job_id).status != JobStatus.SUCCESS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert queue.get(job_id).status == JobStatus.SUCCESS
    finally:
        stop.set()
        thread.join(WAIT_S)
        wakeup.close()
        worker_db.dispose()
    assert not thread.is_alive()
