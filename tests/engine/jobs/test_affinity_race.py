"""Four spawned processes, each holding a different model, drain a mixed queue at once: no
job is claimed twice, and the history shows no job passed over beyond the bound. (Which
worker gets which job depends on when each process starts: not checked here; see
test_affinity_claims and tests/engine/workers/test_affinity_workers.py.)"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import select

from app.engine.jobs.affinity import AffinityBound
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.db import Database
from app.models.opening import open_database
from app.models.tables import JOB, TRANSITION

pytestmark = pytest.mark.both_backends

JOBS = 120
HELD: tuple[list[str], ...] = (["A"], ["B"], ["C"], [])
BOUND = AffinityBound(max_wait_s=600.0, max_skips=5)


def claim_until_empty(location: str, worker_id: str, models: list[str], start: Any) -> list[int]:
    queue = JobQueue(open_database(location), affinity=BOUND)
    claimed: list[int] = []
    start.wait()
    while (job := queue.claim(worker_id, models=models)) is not None:
        claimed.append(job.id or 0)
    queue.db.dispose()
    return claimed


def test_racing_affinity_claims_never_double_claim_nor_pass_the_bound(db: Database) -> None:
    queue = JobQueue(db)
    batch = [
        GenerationParams("a cat", model="ABCD"[(i * 7) % 4], seed=i, steps=2) for i in range(JOBS)
    ]
    queue.submit_many(batch)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(len(HELD)) as pool:
        start = manager.Barrier(len(HELD))
        arguments = [(db.location, f"w{i}", held, start) for i, held in enumerate(HELD)]
        results = pool.starmap(claim_until_empty, arguments)
    claimed = Counter(job_id for result in results for job_id in result)
    assert len(claimed) == JOBS and max(claimed.values()) == 1
    with queue.db.read() as conn:
        order = list(
            conn.execute(
                select(TRANSITION.c.job_id)
                .where(TRANSITION.c.event == "START")
                .order_by(TRANSITION.c.id)
            ).scalars()
        )
        statuses = set(conn.execute(select(JOB.c.status)).scalars())
    assert len(order) == JOBS and statuses == {"PROCESSING"}
    # Claims are serialised, so the history's order is the claim order: count, for each
    # job, the younger jobs claimed before it.
    for position, job_id in enumerate(order):
        overtook = sum(1 for earlier in order[:position] if earlier > job_id)
        assert overtook <= BOUND.max_skips, f"job {job_id} was passed over {overtook} times"
