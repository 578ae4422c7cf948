"""One clock for a shared queue (issue 21, item 1): machines whose clocks are minutes off
still agree on heartbeats, backoffs and timelines, because time comes from the server.

The end-to-end test runs real headless workers against the real PostgreSQL test server:
one on the true clock, one 10 minutes ahead and one 10 minutes behind (libfaketime, wall
clock only), each with its own watchdog. Before the store's clock, the fast one timed out
every job of the others, and the others timed out every job of the slow one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.history.stats import history_stats
from app.engine.jobs.clock import StoreClock
from app.engine.jobs.queue import JobQueue
from app.engine.settings import Settings
from app.models.db import Database
from app.models.opening import open_database
from tests import pg
from tests.engine.workers.headless import (
    all_succeeded,
    faketime_or_skip,
    machines,
    settled_or_given_up,
    timed_out_rows,
    wait_until,
)
from tests.engine.workers.worker_fixtures import fake_params

SKEW = {"true-clock": None, "ahead": "+10m", "behind": "-10m"}
JOBS = 9
SETTINGS = Settings(heartbeat_timeout_s=4.0, max_attempts=3)


@pytest.fixture
def shared_db() -> Iterator[Database]:
    with pg.fresh_schema() as url:
        db = open_database(url)
        yield db
        db.dispose()


def test_workers_with_skewed_clocks_time_out_no_healthy_job(
    shared_db: Database, tmp_path: Path
) -> None:
    faketime_or_skip()
    queue = JobQueue(shared_db)
    with machines(tmp_path, shared_db.location, SETTINGS, SKEW):
        # All three up before the jobs come: a busy machine starts the faketime ones last,
        # and the first worker up could run every job before they claim one.
        wait_until(lambda: _workers_up(shared_db) >= set(SKEW), timeout_s=60,
                   what="the three workers to register")  # fmt: skip
        ids = [queue.submit(fake_params("step=0.1", steps=15, seed=i)) for i in range(JOBS)]
        wait_until(
            lambda: all_succeeded(queue, ids) or settled_or_given_up(queue, ids),
            timeout_s=120, what="every job to finish",
        )  # fmt: skip
        timed_out = timed_out_rows(queue, ids)
        jobs = [queue.get(i) for i in ids]
    assert timed_out == [], [f"#{t.job_id}: {t.message}" for t in timed_out]
    assert [job.status for job in jobs] == ["SUCCESS"] * JOBS
    assert [job.attempt for job in jobs] == [1] * JOBS
    # Every machine took part, the skewed ones too (else the test proves nothing).
    ran_on = {(job.worker_id or "").split(":")[0] for job in jobs}
    assert ran_on == set(SKEW), ran_on
    for job_id in ids:
        times = [t.at for t in queue.timeline(job_id)]
        assert times == sorted(times), f"job {job_id}'s timeline runs backwards: {times}"
    stats = history_stats(queue, 0, queue.clock() + 1).as_dict()
    waits = [value for spread in stats["wait_s"].values() for value in spread.values()]
    assert all(value is None or value >= 0 for value in waits), stats["wait_s"]


def _workers_up(db: Database) -> set[str]:
    """The machines (worker ids "name:..." ) with a row in the worker table."""
    from sqlalchemy import select

    from app.models.tables import WorkerRow

    table = WorkerRow.__table__  # type: ignore[attr-defined]
    with db.read() as conn:
        ids = conn.execute(select(table.c.id).where(table.c.state != "exited")).scalars()
        return {str(worker_id).split(":")[0] for worker_id in ids}


def test_the_store_clock_is_the_servers_and_never_runs_backwards(shared_db: Database) -> None:
    ticks = [0.0]
    clock = StoreClock(shared_db, refresh_s=10.0, monotonic=lambda: ticks[0])
    first = clock()
    server = shared_db.server_time()
    assert server is not None and abs(first - server) < 1.0
    ticks[0] += 3.0  # between refreshes: the offset from the monotonic clock, no round trip
    assert clock() == pytest.approx(first + 3.0)
    ticks[0] = 2.0  # a later refresh that lands a little earlier must not move time back
    clock._next_refresh = -float("inf")
    assert clock() >= first + 3.0


def test_a_local_file_keeps_the_machines_clock(tmp_path: Path) -> None:
    db = open_database(tmp_path / "easel.db")
    try:
        assert db.server_time() is None
        import time

        before = time.time()
        assert before <= StoreClock(db)() <= time.time()
    finally:
        db.dispose()
