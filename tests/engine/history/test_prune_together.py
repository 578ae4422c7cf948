"""Two prunes at once (two machines, or the window and a headless worker) on both stores:
neither fails, each job goes once, and whatever must stay stays."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import Connection

from app.engine.history.retention import PruneReport, RetentionRule, prune
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.opening import open_database
from tests.engine.history.conftest import KEPT, old_and_kept_jobs

pytestmark = [pytest.mark.both_backends, pytest.mark.timeout(120)]

LONG_AGO = 1_000.0
NOW = 1_000_000.0
OLD = RetentionRule(older_than_s=86_400)
JOBS = 1_300  # three batches each: the two prunes' transactions interleave


def old_jobs(location: str) -> tuple[list[int], dict[str, int]]:
    db = open_database(location)
    made = old_and_kept_jobs(JobQueue(db, clock=lambda: LONG_AGO), JOBS)
    db.dispose()
    return made


def at_once(location: str, runs: int, work: Callable[[JobQueue], PruneReport]) -> list[object]:
    """`work` on `runs` threads, each with its own connection pool, started together."""
    start = threading.Barrier(runs)
    results: list[object] = [None] * runs

    def run(index: int) -> None:
        db = open_database(location)
        try:
            start.wait()
            results[index] = work(JobQueue(db))
        except Exception as error:
            results[index] = error
        finally:
            db.dispose()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_two_prunes_at_once_remove_each_old_job_once_and_keep_the_rest(
    db_location: str,
) -> None:
    ids, keepers = old_jobs(db_location)
    first, second = at_once(db_location, 2, lambda queue: prune(queue, OLD, now=NOW))
    assert isinstance(first, PruneReport), first
    assert isinstance(second, PruneReport), second
    assert not set(first.removed) & set(second.removed)  # each told once, by whoever did it
    assert sorted(first.removed + second.removed) == ids
    db = open_database(db_location)
    left = {job.id: job.status for job in JobQueue(db).jobs(limit=None)}
    db.dispose()
    assert left == {keepers[kind]: status for kind, status in KEPT.items()}


def test_a_star_that_commits_while_the_prune_waits_keeps_the_job(
    db_location: str, backend: str
) -> None:
    db = open_database(db_location)
    queue = JobQueue(db, clock=lambda: LONG_AGO)
    doomed, starred = queue.submit_many([GenerationParams("old"), GenerationParams("loved")])
    for job_id in (doomed, starred):
        queue.cancel(job_id)
    pruned: list[object] = []
    with db.write() as conn:  # the user stars it just as the prune reaches it
        conn.exec_driver_sql(f"UPDATE job SET starred = true WHERE id = {starred}")
        pruning = threading.Thread(target=lambda: pruned.extend(at_once(db_location, 1, _old)))
        pruning.start()
        _until_the_prune_waits(conn, backend)
    pruning.join()
    assert isinstance(pruned[0], PruneReport) and pruned[0].removed == [doomed]
    assert [job.id for job in queue.jobs(limit=None)] == [starred]
    db.dispose()


def _old(queue: JobQueue) -> PruneReport:
    return prune(queue, OLD, now=NOW)


def _until_the_prune_waits(conn: Connection, backend: str) -> None:
    """PostgreSQL shows the prune waiting for the starred row; SQLite cannot show a waiter,
    and there BEGIN IMMEDIATE keeps the prune from reading before the star commits anyway."""
    if backend == "sqlite":
        time.sleep(0.5)
        return
    deadline = time.monotonic() + 30
    waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted"
    with conn.engine.connect() as watcher:
        while not watcher.exec_driver_sql(waiting).scalar_one():
            assert time.monotonic() < deadline, "the prune never reached the starred job"
            time.sleep(0.01)
            watcher.rollback()
