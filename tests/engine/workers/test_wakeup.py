"""An idle worker is woken by new work, not by its poll: LISTEN/NOTIFY on PostgreSQL, the
file's commit counter on SQLite."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.messages import MessageKind, WorkerMessage
from app.engine.workers.wakeup import (
    FALLBACK_READ_S,
    CommitWakeup,
    DatabaseWakeup,
    JobWatch,
    Wakeup,
    wakeup_for,
)
from app.engine.workers.worker import Outbox, Worker
from app.models.db import Database
from app.models.opening import open_database
from app.models.postgres import JobListener
from app.testing.scripted_runner import ScriptedRunner
from tests import pg
from tests.engine.workers.worker_fixtures import WAIT_S, fake_params, worker_config

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
        # (The channel is the database's: filter out other schemas' tests running meanwhile.)
        assert not [p for p in listener.wait(0.5) if p.startswith(f"{job_id} ")]
        queue.cancel(job_id)
        assert listener.wait(5.0) == [f"{job_id} CANCELLING"]
    finally:
        listener.close()


def test_an_idle_worker_is_woken_by_a_new_job_long_before_its_poll(
    db: Database, tmp_path: Path
) -> None:
    worker_db = open_database(db.location)
    wakeup = wakeup_for(worker_db)
    assert isinstance(wakeup, DatabaseWakeup)
    assert_woken_long_before_the_poll(JobQueue(db), worker_db, wakeup, tmp_path)


def test_on_sqlite_an_idle_worker_is_woken_by_a_commit_long_before_its_poll(
    tmp_path: Path,
) -> None:
    """No server to announce work: the file's commit counter, looked at every WATCH_S."""
    db = open_database(str(tmp_path / "easel.db"))
    worker_db = open_database(db.location)
    wakeup = wakeup_for(worker_db)
    assert isinstance(wakeup, CommitWakeup)
    try:
        assert_woken_long_before_the_poll(JobQueue(db), worker_db, wakeup, tmp_path)
    finally:
        db.dispose()


def test_on_sqlite_the_commit_wakeup_sleeps_out_its_timeout_when_nobody_commits(
    tmp_path: Path,
) -> None:
    db = open_database(str(tmp_path / "easel.db"))
    wakeup = CommitWakeup(db)
    try:
        began = time.monotonic()
        assert not wakeup.wait(0.2)
        assert time.monotonic() - began >= 0.19
        JobQueue(open_database(db.location)).submit(fake_params())  # another connection
        assert wakeup.wait(5.0)
        assert not wakeup.wait(0.05)  # that commit is told once
    finally:
        wakeup.close()
        db.dispose()


def assert_woken_long_before_the_poll(
    queue: JobQueue, worker_db: Database, wakeup: Wakeup, tmp_path: Path
) -> None:
    config = replace(worker_config(queue, tmp_path), idle_poll_s=NEVER_S)
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


# --- a running job hears its cancel without reading its row at every step ------------------


class Heard:
    """What the fake server has to say at the watching thread's next listen."""

    def __init__(self) -> None:
        self.payloads: list[str] = []
        self.delivered = threading.Event()

    def listen(self, timeout_s: float) -> list[str]:
        time.sleep(0.01)
        taken, self.payloads = self.payloads, []
        if taken:
            self.delivered.set()
        return taken


def test_a_job_watch_reads_after_its_own_notification_and_once_a_second_otherwise() -> None:
    now = [100.0]
    heard = Heard()
    watch = JobWatch(heard.listen, clock=lambda: now[0])
    try:
        with watch.watching(7) as reads:
            assert reads.due()  # the first step reads: nothing heard yet
            assert not reads.due()
            heard.payloads = ["8 CANCELLING", "17 PAUSING"]  # other jobs
            assert heard.delivered.wait(5)
            assert not reads.due()
            heard.delivered.clear()
            heard.payloads = ["7 CANCELLING"]
            assert heard.delivered.wait(5)
            assert reads.due() and not reads.due()  # once per notification
            now[0] += FALLBACK_READ_S
            assert reads.due()  # the fallback: a notification may be lost
        with watch.watching(8) as reads:
            assert reads.due()  # a new job starts with a read
    finally:
        watch.close()


def test_a_remote_worker_stops_at_the_step_after_a_cancel_without_reading_every_step(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = JobQueue(db)
    job_id = queue.submit(fake_params("step=0.02", steps=150))
    worker_db = open_database(db.location)
    worker_queue = JobQueue(worker_db)
    reads: list[int] = []
    read_row = worker_queue.status_if_held

    def counted_read(job: int, worker: str) -> JobStatus | None:
        reads.append(job)
        return read_row(job, worker)

    monkeypatch.setattr(worker_queue, "status_if_held", counted_read)
    progress: list[int] = []
    cancelled_at: list[int] = []

    def heard(message: WorkerMessage) -> None:
        if message.kind is MessageKind.PROGRESS and message.step is not None:
            progress.append(message.step)
            if message.step == 20:
                queue.cancel(job_id)
                cancelled_at.append(message.step)

    config = replace(worker_config(queue, tmp_path), until_idle=True)
    wakeup = wakeup_for(worker_db)
    outbox = Outbox(heard)
    worker = Worker(config, worker_queue, ScriptedRunner(), "w1", outbox, wakeup=wakeup)
    try:
        worker.run()
    finally:
        outbox.close()
        wakeup.close()
        worker_db.dispose()
    assert queue.get(job_id).status == JobStatus.CANCELLED
    assert cancelled_at == [20]
    # The outbox hands messages over on a thread of its own, so the cancel may land a step
    # or two after step 20 was reported; the notification then stops the next step.
    assert max(progress) <= 20 + 3
    assert len(reads) < max(progress) / 3  # the row was read on a few steps, not on each


def test_on_sqlite_idle_workers_claims_that_find_nothing_wake_nobody(tmp_path: Path) -> None:
    """Two idle workers must not wake each other for ever: a claim that finds nothing
    commits no change, so the other's counter stays put."""
    db = open_database(str(tmp_path / "easel.db"))
    other = JobQueue(open_database(db.location))
    assert other.claim("w2") is None  # the first claim of a process may set things up
    wakeup = CommitWakeup(db)
    try:
        for _ in range(3):
            assert other.claim("w2") is None
        assert not wakeup.wait(0.2)
    finally:
        wakeup.close()
        other.db.dispose()
        db.dispose()
