"""The worker's claim writes its own worker row (busy, the job, its model, the models it holds
once that is loaded) in the claim's commit: no second write after it, and the row says so
before the job's run begins. In this process, so every write can be watched."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.engine.generation.outcome import GenerationOutcome
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.worker import Outbox, Worker, database_file
from app.engine.workers.worker_states import WorkerState
from app.models.opening import open_database
from app.models.tables import WORKER, Job
from app.testing.scripted_runner import ScriptedRunner
from tests.engine.workers.worker_fixtures import fake_params, worker_config

pytestmark = pytest.mark.both_backends

WORKER_ID = "w1"
HELD_BEFORE = "held-before"


class RowReadingRunner(ScriptedRunner):
    """Holds one model before its first job; as each run begins, reads its worker's row."""

    def __init__(self, queue: JobQueue) -> None:
        super().__init__()
        self.queue = queue
        self.rows: list[dict[str, Any]] = []

    def held_models(self) -> list[str]:
        return [HELD_BEFORE]

    def run(self, params: GenerationParams, **kwargs: Any) -> GenerationOutcome:
        with self.queue.db.read() as conn:
            row = conn.execute(select(WORKER).where(WORKER.c.id == WORKER_ID)).one()
        self.rows.append(dict(row._mapping))
        return super().run(params, **kwargs)


def run_until_idle(queue: JobQueue, tmp_path: Path) -> tuple[RowReadingRunner, list[Any]]:
    """A worker in this thread until the queue is idle: its runner, and every write its
    row had from `Presence.update` and from its claims, in order."""
    worker_queue = JobQueue(open_database(database_file(queue)))
    runner = RowReadingRunner(worker_queue)
    config = replace(worker_config(queue, tmp_path), until_idle=True, presence_interval_s=60.0)
    worker = Worker(config, worker_queue, runner, WORKER_ID, Outbox(None))
    writes: list[Any] = []
    update, claim = worker.presence.update, worker_queue.claim

    def updated(state: WorkerState, **changes: Any) -> None:
        writes.append(("update", state, changes))
        update(state, **changes)

    def claimed(*args: Any, **kwargs: Any) -> Job | None:
        job = claim(*args, **kwargs)
        writes.append(("claim", job.id if job is not None else None))
        return job

    worker.presence.update = updated  # type: ignore[method-assign]
    worker_queue.claim = claimed  # type: ignore[method-assign]
    try:
        worker.run()
    finally:
        worker_queue.db.dispose()
    return runner, writes


def test_the_workers_claim_writes_its_row_busy_with_the_job_and_no_second_write(
    queue: JobQueue, tmp_path: Path
) -> None:
    job_id = queue.submit(fake_params(steps=2))
    runner, writes = run_until_idle(queue, tmp_path)
    job = queue.get(job_id)
    assert job.status == JobStatus.SUCCESS
    [row] = runner.rows
    assert (row["state"], row["current_job"], row["model"]) == ("busy", job_id, "fake")
    assert json.loads(row["models"]) == ["fake", HELD_BEFORE]
    assert row["last_seen_at"] == job.started_at  # written by the claim, at its time
    # Between the claim and the end of its job, nothing else wrote the row.
    at = writes.index(("claim", job_id))
    [(_, state, changes)] = [w for w in writes[at + 1 :] if w[0] == "update"][:1]
    assert (state, changes["current_job"], changes["jobs_done"]) == (WorkerState.IDLE, None, 1)


def test_a_worker_row_written_by_claims_follows_each_job(queue: JobQueue, tmp_path: Path) -> None:
    ids = queue.submit_many([fake_params(steps=1, seed=1), fake_params(steps=1, seed=2)])
    runner, writes = run_until_idle(queue, tmp_path)
    assert [row["current_job"] for row in runner.rows] == ids
    assert all(row["state"] == "busy" for row in runner.rows)
    assert not [w for w in writes if w[0] == "update" and w[2].get("current_job") in ids]
