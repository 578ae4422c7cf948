"""The periodic passes finish a cancel whose undo window died (issue 20.6): the headless
worker's maintenance and the app's supervisor, each on a real store."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.jobs.undo import WINDOW_GONE, hold_for_undo
from app.engine.workers.maintenance import SOURCE as MAINTENANCE
from app.engine.workers.maintenance import Maintenance
from app.engine.workers.supervisor import SOURCE as SUPERVISOR
from tests.engine.workers.worker_fixtures import Harness, fake_params

pytestmark = pytest.mark.both_backends
S = JobStatus


def held_past_its_time(queue: JobQueue) -> tuple[int, int]:
    """A held job whose undo time is over, and one still inside it."""
    over, inside = queue.submit(fake_params()), queue.submit(fake_params())
    hold_for_undo(queue, over, cancel_after=time.time() - 1)
    hold_for_undo(queue, inside, cancel_after=time.time() + 600)
    return over, inside


def last_row(queue: JobQueue, job_id: int) -> tuple[str, str, str]:
    last = queue.timeline(job_id)[-1]
    return last.event, last.source, last.message


def test_the_maintenance_pass_finishes_a_cancel_whose_time_is_over(queue: JobQueue) -> None:
    over, inside = held_past_its_time(queue)
    Maintenance(queue, heartbeat_timeout_s=15.0, policy=RetryPolicy()).run_once()
    assert queue.get(over).status == S.CANCELLED.value
    assert last_row(queue, over) == (JobEvent.CANCEL.value, MAINTENANCE, WINDOW_GONE)
    assert queue.get(inside).status == S.PAUSED.value


def test_the_supervisor_pass_finishes_a_cancel_whose_time_is_over(
    queue: JobQueue, tmp_path: Path
) -> None:
    over, inside = held_past_its_time(queue)
    supervisor = Harness(queue, tmp_path).supervisor(workers=1)
    supervisor._maintain(time.time())  # the pass poll() runs, without starting a worker
    assert queue.get(over).status == S.CANCELLED.value
    assert last_row(queue, over) == (JobEvent.CANCEL.value, SUPERVISOR, WINDOW_GONE)
    assert queue.get(inside).status == S.PAUSED.value
