"""Real worker processes on one queue (a SQLite file, or PostgreSQL as machines share it):
two workers holding different models each keep theirs, and the worker rows say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.models.tables import WORKER
from app.testing.holding_runner import LEDGER_ENV, HoldingRunner, read_ledger
from tests.engine.workers.worker_fixtures import harness

pytestmark = pytest.mark.both_backends


def worker_models(queue: JobQueue) -> dict[str, list[str]]:
    with queue.db.read() as conn:
        rows = conn.execute(select(WORKER.c.id, WORKER.c.models)).all()
    return {worker_id: json.loads(models or "[]") for worker_id, models in rows}


def test_two_workers_holding_different_models_each_keep_theirs(
    queue: JobQueue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "loads.jsonl"
    monkeypatch.setenv(LEDGER_ENV, str(ledger))  # the spawned workers inherit it
    with harness(queue, tmp_path) as h:
        for model in "AB":
            h.supervisor(runner_factory=HoldingRunner, warm_model=model).start()
        h.wait_for(
            lambda: sorted(m for held in worker_models(queue).values() for m in held) == ["A", "B"],
            what="both workers to hold their model",
        )
        ids = [
            queue.submit(GenerationParams(f"a cat step=0.02 {i}", model="AB"[i % 2], steps=3))
            for i in range(8)
        ]
        for job_id in ids:
            h.wait_status(job_id, JobStatus.SUCCESS)
    runs = {job_id: queue.get(job_id) for job_id in ids}
    by_model = {m: {j.worker_id for j in runs.values() if j.model == m} for m in "AB"}
    assert all(len(workers) == 1 for workers in by_model.values()), by_model
    assert by_model["A"] != by_model["B"]
    loads = [model for _pid, model, _s, _e in read_ledger(ledger)]
    assert sorted(m for m in loads if not m.startswith("ahead:")) == ["A", "B"]
    last = queue.timeline(ids[-1])[-1].message
    assert last.endswith("; model already loaded"), last


def test_while_a_job_runs_the_next_model_is_read_ahead(
    queue: JobQueue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "loads.jsonl"
    monkeypatch.setenv(LEDGER_ENV, str(ledger))
    with harness(queue, tmp_path) as h:
        h.supervisor(runner_factory=HoldingRunner, warm_model="A").start()
        h.wait_for(lambda: list(worker_models(queue).values()) == [["A"]])
        first, then = queue.submit_many(  # together: the first claim sees the second job
            [GenerationParams("a cat step=0.05", model="A", steps=4),
             GenerationParams("a dog", model="B", steps=2)]
        )  # fmt: skip
        h.wait_status(then, JobStatus.SUCCESS)
    events = [model for _pid, model, _s, _e in read_ledger(ledger)]
    assert events == ["A", "ahead:B", "B"], events
    assert queue.get(first).status == JobStatus.SUCCESS
