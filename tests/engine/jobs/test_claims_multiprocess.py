"""Four spawned processes drain 2,000 jobs: no job is ever claimed twice."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import select

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.db import Database
from app.models.opening import open_database
from app.models.tables import JOB, TRANSITION

pytestmark = pytest.mark.both_backends

JOBS = 2_000
PROCESSES = 4


def claim_until_empty(location: str, worker_id: str, start: Any) -> list[int]:
    queue = JobQueue(open_database(location))
    claimed: list[int] = []
    start.wait()  # all processes race from the same moment, not from their spawn times
    while (job := queue.claim(worker_id)) is not None:
        claimed.append(job.id or 0)  # a claimed job is stored: it has an id
    queue.db.dispose()
    return claimed


def test_no_job_is_claimed_twice(db: Database) -> None:
    queue = JobQueue(db)
    queue.submit_many([GenerationParams("a blue triangle", seed=1, steps=2)] * JOBS)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(PROCESSES) as pool:
        start = manager.Barrier(PROCESSES)
        results = pool.starmap(
            claim_until_empty, [(db.location, f"w{i}", start) for i in range(PROCESSES)]
        )

    claimed = Counter(job_id for result in results for job_id in result)
    assert len(claimed) == JOBS
    assert max(claimed.values()) == 1
    assert sum(1 for result in results if result) >= 2, "the claims should have overlapped"
    with queue.db.read() as conn:
        starts = Counter(
            conn.execute(select(TRANSITION.c.job_id).where(TRANSITION.c.event == "START")).scalars()
        )
        statuses = set(conn.execute(select(JOB.c.status)).scalars())
    assert len(starts) == JOBS and max(starts.values()) == 1
    assert statuses == {"PROCESSING"}
