"""Cancel with undo (issue 20.6): the hold, Undo, the cancel, and the passes that finish a
cancel whose window died, on a real store (both backends)."""

from __future__ import annotations

import pytest

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.jobs.undo import (
    HOLD_MESSAGE,
    HOLD_SOURCE,
    WINDOW_GONE,
    Hold,
    complete_pending_cancels,
    finish,
    hold_for_undo,
    undo,
)

pytestmark = pytest.mark.both_backends
S, E = JobStatus, JobEvent
NOW = 1_000_000.0
DEADLINE = NOW + 36.0


def queued(queue: JobQueue) -> int:
    return queue.submit(GenerationParams("a cat", steps=4, seed=1))


def history(queue: JobQueue, job_id: int) -> list[tuple[str, str, str]]:
    return [(t.event, t.source, t.message) for t in queue.timeline(job_id)]


def test_a_queued_job_is_held_paused_with_its_cancel_stored(queue: JobQueue) -> None:
    job_id = queued(queue)
    assert hold_for_undo(queue, job_id, cancel_after=DEADLINE) is Hold.QUEUED
    job = queue.get(job_id)
    assert (job.status, job.cancel_after) == (S.PAUSED.value, DEADLINE)
    assert history(queue, job_id)[-1] == (E.PAUSE.value, HOLD_SOURCE, HOLD_MESSAGE)


def test_a_paused_job_is_only_marked_no_history_row(queue: JobQueue) -> None:
    job_id = queued(queue)
    queue.pause(job_id)
    assert hold_for_undo(queue, job_id, cancel_after=DEADLINE) is Hold.PAUSED
    assert queue.get(job_id).cancel_after == DEADLINE
    assert [event for event, _s, _m in history(queue, job_id)] == ["SUBMIT", "PAUSE"]
    assert undo(queue, job_id, requeue=False)
    job = queue.get(job_id)
    assert (job.status, job.cancel_after) == (S.PAUSED.value, None)


def test_a_running_job_is_not_held(queue: JobQueue) -> None:
    job_id = queued(queue)
    assert queue.claim("test-worker") is not None
    assert hold_for_undo(queue, job_id, cancel_after=DEADLINE) is None
    assert queue.get(job_id).cancel_after is None


def test_undo_queues_it_again_and_no_pass_cancels_it_later(queue: JobQueue) -> None:
    job_id = queued(queue)
    hold_for_undo(queue, job_id, cancel_after=DEADLINE)
    assert undo(queue, job_id, requeue=True)
    job = queue.get(job_id)
    assert (job.status, job.cancel_after) == (S.PENDING.value, None)
    assert complete_pending_cancels(queue, DEADLINE + 60, source="recovery") == []
    assert not undo(queue, job_id, requeue=True)  # nothing pending any more


def test_finish_cancels_a_held_job_once(queue: JobQueue) -> None:
    job_id = queued(queue)
    hold_for_undo(queue, job_id, cancel_after=DEADLINE)
    assert finish(queue, job_id)
    assert queue.get(job_id).status == S.CANCELLED.value
    assert history(queue, job_id)[-1] == (E.CANCEL.value, "user", "")
    assert not finish(queue, job_id)
    assert not undo(queue, job_id, requeue=True)  # too late: it stays cancelled


def test_a_pending_cancel_is_finished_only_once_its_time_passed(queue: JobQueue) -> None:
    held, other = queued(queue), queued(queue)
    hold_for_undo(queue, held, cancel_after=DEADLINE)
    queue.pause(other)  # a plain pause: never cancelled by the passes
    assert complete_pending_cancels(queue, DEADLINE - 1, source="recovery") == []
    assert queue.get(held).status == S.PAUSED.value
    assert complete_pending_cancels(queue, DEADLINE, source="recovery") == [held]
    assert queue.get(held).status == S.CANCELLED.value
    assert history(queue, held)[-1] == (E.CANCEL.value, "recovery", WINDOW_GONE)
    assert queue.get(other).status == S.PAUSED.value


def test_a_held_job_resumed_elsewhere_loses_its_pending_cancel(queue: JobQueue) -> None:
    job_id = queued(queue)
    hold_for_undo(queue, job_id, cancel_after=DEADLINE)
    queue.resume(job_id, source="cli")  # `python -m app resume` inside the undo time
    assert queue.get(job_id).cancel_after is None
    queue.pause(job_id)  # paused again later, on purpose: it must stay paused
    assert complete_pending_cancels(queue, DEADLINE + 60, source="recovery") == []
    assert not finish(queue, job_id)
    assert queue.get(job_id).status == S.PAUSED.value
