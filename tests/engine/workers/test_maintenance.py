"""Many machines: every worker runs the watchdog, a live remote worker's job is never taken,
a worker that loses the database server reconnects, and the headless worker command."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from app.cli import main
from app.engine.generation.device import DEVICE_ENV
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.workers.maintenance import Maintenance, MaintenancePass
from app.engine.workers.recovery import recover
from app.engine.workers.watchdog import TimedOut
from app.engine.workers.worker import Outbox, Worker
from app.errors import BadInput, DatabaseUnreachable
from app.models.database_urls import parse_url
from app.models.db import Database
from app.models.opening import open_database
from app.testing.scripted_runner import ScriptedRunner
from tests import pg
from tests.engine.conftest import TINY_MODEL
from tests.engine.workers.worker_fixtures import (
    WAIT_S,
    events,
    fake_params,
    harness,
    link_model,
    worker_config,
)
from tests.faults import write_lock_held

S = JobStatus
TIMEOUT_S = 15.0
POLICY = RetryPolicy(base_delay_s=0.1, max_delay_s=0.5)
LONG_AGO = 1_000.0


def held_by(queue: JobQueue, worker_id: str, *, heartbeat_age_s: float) -> int:
    """A job claimed by `worker_id` (another machine), last heard of `heartbeat_age_s` ago."""
    job_id = queue.submit(fake_params())
    then = JobQueue(queue.db, clock=lambda: time.time() - heartbeat_age_s)
    claimed = then.claim(worker_id, job_id=job_id)
    assert claimed is not None
    return job_id


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition()


@pytest.mark.both_backends
def test_every_worker_runs_the_watchdog_and_two_at_once_settle_a_job_once(
    db: Database,
) -> None:
    queue = JobQueue(db)
    lost = held_by(queue, "ghost-box:4242:deadbeef", heartbeat_age_s=LONG_AGO)
    alive = held_by(queue, "gpu-box:77:cafe", heartbeat_age_s=1.0)
    other = JobQueue(open_database(db.location))  # a second machine's watchdog
    try:
        passes = [
            Maintenance(q, heartbeat_timeout_s=TIMEOUT_S, policy=POLICY) for q in (queue, other)
        ]
        threads = [threading.Thread(target=m.run_once) for m in passes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT_S)
    finally:
        other.db.dispose()
    events = [row.event for row in queue.timeline(lost)]
    assert events == ["SUBMIT", "START", "TIMEOUT", "RETRY"]  # one TIMEOUT, one RETRY
    assert queue.get(lost).status == S.PENDING and queue.get(lost).attempt == 2
    assert queue.get(alive).status == S.PROCESSING  # a live remote worker keeps its job


@pytest.mark.both_backends
def test_every_worker_reconciles_children_stranded_between_two_commits(db: Database) -> None:
    # A bare queue has no graph listener: as if the process that settled the parents died
    # right after their commit, before it unblocked or cancelled the children. A headless
    # fleet has no launch recovery and no supervisor, so its watchdog pass must do it.
    queue = JobQueue(db)
    succeeded = queue.submit(fake_params())
    queue.claim("gpu-box:77:cafe", job_id=succeeded)
    queue.fire(succeeded, JobEvent.COMPLETE, source="worker")
    cancelled = queue.submit(fake_params())
    unblocked = queue.submit(fake_params(), parents=[succeeded])
    cascaded = queue.submit(fake_params(), parents=[cancelled])
    queue.cancel(cancelled)
    assert {queue.get(unblocked).status, queue.get(cascaded).status} == {S.BLOCKED}

    Maintenance(queue, heartbeat_timeout_s=TIMEOUT_S, policy=POLICY).run_once()

    assert queue.get(unblocked).status == S.PENDING
    assert queue.get(cascaded).status == S.CANCELLED


@pytest.mark.both_backends
def test_recovery_at_launch_leaves_a_live_remote_workers_job_alone(
    db: Database, tmp_path: Path
) -> None:
    queue = JobQueue(db)
    alive = held_by(queue, "gpu-box:77:cafe", heartbeat_age_s=1.0)
    lost = held_by(queue, "gpu-box:78:beef", heartbeat_age_s=LONG_AGO)
    report = recover(queue, liveness_dir=tmp_path, heartbeat_timeout_s=TIMEOUT_S, policy=POLICY)
    assert report.still_running == [alive] and report.requeued == [lost]
    assert [row.event for row in queue.timeline(alive)] == ["SUBMIT", "START"]


# --- one pass, one error handling: the headless worker's and the app's supervisor's -----------

SHORT_LOCK_S = 0.2  # how long the pass's writes wait for the lock (the default is seconds)
GHOST = "ghost-box:4242:deadbeef"  # a worker on another machine that is gone
OnePass = Callable[[], object]


@contextmanager
def headless_passes(queue: JobQueue, _home: Path) -> Iterator[OnePass]:
    yield Maintenance(queue, heartbeat_timeout_s=TIMEOUT_S, policy=POLICY).run_once


@contextmanager
def supervisor_passes(queue: JobQueue, home: Path) -> Iterator[OnePass]:
    """The app's supervisor, with a worker of its own; a poll runs a pass when one is due (a
    pass that waited out the lock took longer than the supervisor's interval)."""
    with harness(queue, home) as h:
        supervisor = h.supervisor()
        supervisor.start()  # its recovery runs before the stranded job exists
        yield supervisor.poll


@pytest.mark.parametrize("passes", [headless_passes, supervisor_passes])
def test_a_locked_database_skips_one_pass_with_one_line_and_the_next_pass_settles(
    queue: JobQueue,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    passes: Callable[[JobQueue, Path], AbstractContextManager[OnePass]],
) -> None:
    impatient = JobQueue(open_database(queue.db.location, lock_timeout_s=SHORT_LOCK_S))
    try:
        with passes(impatient, tmp_path / "home") as run_pass:
            stranded = held_by(queue, GHOST, heartbeat_age_s=LONG_AGO)
            caplog.clear()
            with write_lock_held(Path(queue.db.location)):
                run_pass()  # its TIMEOUT cannot be written: the pass stops there
            assert queue.get(stranded).status == S.PROCESSING  # nothing half done
            warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(warnings) == 1, warnings
            assert warnings[0].startswith("maintenance pass skipped: The job database ")
            assert "is locked by another program" in warnings[0]
            run_pass()  # the lock is gone: the next pass does what the skipped one could not
        assert events(queue, stranded)[:4] == ["SUBMIT", "START", "TIMEOUT", "RETRY"]
        assert events(queue, stranded).count("TIMEOUT") == 1
    finally:
        impatient.db.dispose()


@pytest.mark.parametrize("bug", [RuntimeError("a bug"), BadInput("not the store's fault")])
def test_any_other_error_in_a_pass_is_raised(queue: JobQueue, bug: Exception) -> None:
    stranded = held_by(queue, GHOST, heartbeat_age_s=LONG_AGO)

    def broken_hook(_timed_out: TimedOut) -> None:
        raise bug

    broken = MaintenancePass(queue, TIMEOUT_S, POLICY, on_timed_out=broken_hook)
    with pytest.raises(type(bug), match=str(bug)):
        broken.run()
    assert events(queue, stranded) == ["SUBMIT", "START", "TIMEOUT"]  # no retry, no reconcile


# --- PostgreSQL: a server that goes away ----------------------------------------------------


@pytest.fixture
def pg_db() -> Iterator[Database]:
    with pg.fresh_schema() as url:
        database = open_database(url)
        yield database
        database.dispose()


def drop_connections_opened_since(db: Database, since: float) -> int:
    """What a server restart does to a client: its connections die under it. Only this
    process's (the test server is shared with the suite's other process, whose tests
    must not lose their connections to this one)."""
    admin = create_engine(parse_url(db.location), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            return len(
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name = 'easel' AND pid <> pg_backend_pid() "
                        "AND backend_start >= to_timestamp(:since) "
                        "AND client_port = ANY(:ports)"
                    ),
                    {"since": since, "ports": sorted(own_tcp_ports())},
                ).all()
            )
    finally:
        admin.dispose()


def own_tcp_ports() -> set[int]:
    """The local ports of this process's TCP sockets (Linux: its fds' socket inodes, looked
    up in the kernel's TCP tables)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_a_lost_connection_is_one_clear_error_then_the_next_write_reconnects(
    pg_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    since = time.time()
    queue = JobQueue(open_database(pg_db.location))
    try:
        queue.submit(fake_params())
        assert drop_connections_opened_since(pg_db, since) >= 1
        with pytest.raises(DatabaseUnreachable, match="Lost the job database"):
            queue.claim("w1")
        job = queue.claim("w1")  # a fresh connection, nothing lost
        assert job is not None and job.status == S.PROCESSING
    finally:
        queue.db.dispose()
    # The dead connection was dropped, not handed back for a reset that fails and logs a
    # traceback (as every worker did at each server restart).
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_a_worker_that_loses_the_server_reconnects_and_carries_on(
    pg_db: Database, tmp_path: Path
) -> None:
    queue = JobQueue(pg_db)
    since = time.time()
    worker_db = open_database(pg_db.location)
    stop = threading.Event()
    worker = Worker(
        worker_config(queue, tmp_path), JobQueue(worker_db), ScriptedRunner(), "w1",
        Outbox(None), stop_event=stop,
    )  # fmt: skip
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        first = queue.submit(fake_params(steps=2))
        wait_until(lambda: queue.get(first).status == S.SUCCESS)
        assert drop_connections_opened_since(pg_db, since) >= 1
        second = queue.submit(fake_params(steps=2))
        wait_until(lambda: queue.get(second).status == S.SUCCESS)
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(WAIT_S)
        worker_db.dispose()


# --- the headless worker command ------------------------------------------------------------


@pytest.mark.slow
def test_a_headless_worker_on_postgresql_recovers_stranded_jobs_and_spares_live_ones(
    pg_db: Database,
    tiny_model_dir: Path,
    easel_home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    link_model(tiny_model_dir, easel_home)
    queue = JobQueue(pg_db)
    params = replace(fake_params(steps=2), model=TINY_MODEL, width=32, height=32)
    stranded = queue.submit(params)
    assert JobQueue(pg_db, clock=lambda: time.time() - LONG_AGO).claim("ghost:1:dead")
    alive = held_by(queue, "gpu-box:77:cafe", heartbeat_age_s=1.0)
    monkeypatch.delenv(DEVICE_ENV, raising=False)  # --device sets it for this process
    beating = threading.Event()

    def gpu_box_heartbeats() -> None:  # the other machine's worker, alive throughout
        while not beating.wait(1.0):
            queue.heartbeat(alive, "gpu-box:77:cafe")

    threading.Thread(target=gpu_box_heartbeats, daemon=True).start()
    try:
        code = main(["--db", pg_db.location, "worker", "--until-idle", "--name", "render-2",
                     "--device", "cpu"])  # fmt: skip
    finally:
        beating.set()

    assert code == 0
    job = queue.get(stranded)
    assert job.status == S.SUCCESS and (job.worker_id or "").startswith("render-2:")
    assert [row.event for row in queue.timeline(stranded)] == [
        "SUBMIT", "START", "TIMEOUT", "RETRY", "START", "COMPLETE",
    ]  # fmt: skip
    assert queue.get(alive).status == S.PROCESSING
    assert f"job {stranded}:" in capsys.readouterr().out


def test_the_worker_command_refuses_a_bad_device_or_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["worker", "--device", "gpu0"]) == 2
    assert "cuda:N" in capsys.readouterr().err
    assert main(["worker", "--name", "my box"]) == 2
    assert "worker name" in capsys.readouterr().err
