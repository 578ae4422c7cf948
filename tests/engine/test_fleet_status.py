"""The Workers panel's data: workers as the job table sees them."""

from __future__ import annotations

import pytest

from app.engine.fleet_status import WorkerSummary, list_workers
from app.engine.queue import JobQueue
from app.engine.states import JobEvent
from app.models.db import Database
from tests.engine.worker_fixtures import fake_params

GPU = "gpu-box:77:cafe"
LAPTOP = "laptop:12:beef"


def run_to_success(queue: JobQueue, worker_id: str) -> None:
    job_id = queue.submit(fake_params())
    assert queue.claim(worker_id, job_id=job_id) is not None
    queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id=worker_id)


@pytest.mark.both_backends
def test_workers_are_listed_busy_first_with_their_job_heartbeat_and_count(db: Database) -> None:
    clock = [1000.0]
    queue = JobQueue(db, clock=lambda: clock[0])
    run_to_success(queue, GPU)
    run_to_success(queue, LAPTOP)
    clock[0] = 1010.0
    run_to_success(queue, LAPTOP)
    busy = queue.submit(fake_params())
    assert queue.claim(GPU, job_id=busy) is not None
    clock[0] = 1020.0
    queue.heartbeat(busy, GPU)
    assert list_workers(queue, now=1025.0) == [
        WorkerSummary(GPU, "gpu-box", busy, 5.0, 1),
        WorkerSummary(LAPTOP, "laptop", None, 15.0, 2),
    ]


def test_no_jobs_no_workers(queue: JobQueue) -> None:
    assert list_workers(queue) == []
