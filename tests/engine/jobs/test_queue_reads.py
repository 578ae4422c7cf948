"""The queue's narrow reads for the server (event streams, waiting requests): a few columns,
the same answers as the whole rows give."""

from __future__ import annotations

import pytest

import app.engine.jobs.queue as queue_module
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus

pytestmark = pytest.mark.both_backends
PARAMS = GenerationParams("a red circle on a blue background", steps=4)


def test_endings_read_every_asked_job_in_chunks_and_skip_unknown_ones(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_module, "IDS_A_QUERY", 2)  # five ids: three chunks
    pending, failed, done = queue.submit_many([PARAMS] * 3)
    for job_id in (failed, done):
        assert queue.claim("w1", job_id=job_id) is not None
    queue.fire(failed, JobEvent.FAIL, source="worker", changes={"error_transient": True})
    queue.fire(done, JobEvent.COMPLETE, source="worker")
    queue.mark_given_up(failed, "tried enough")

    endings = queue.endings([done, 999_999, pending, failed, 999_998])

    assert sorted(endings) == sorted(
        [
            (pending, JobStatus.PENDING.value, False, None),
            (failed, JobStatus.FAILED.value, True, True),
            (done, JobStatus.SUCCESS.value, False, None),
        ]
    )
    assert queue.endings([]) == []


def test_running_progress_is_the_running_jobs_steps(queue: JobQueue) -> None:
    running, waiting = queue.submit_many([PARAMS] * 2)
    assert queue.claim("w1", job_id=running) is not None
    assert queue.report_progress(running, "w1", 3, 4)

    assert queue.running_progress() == {running: (3, 4)}
    assert queue.running_progress(running) == {running: (3, 4)}
    assert queue.running_progress(waiting) == {}
    assert {job.id for job in queue.running_jobs()} == set(queue.running_progress())


def test_transitions_after_an_id_come_in_id_order_up_to_the_limit(queue: JobQueue) -> None:
    assert queue.newest_transition_id() == 0
    first, second = queue.submit_many([PARAMS] * 2)
    queue.cancel(first)
    history = [*queue.timeline(first), *queue.timeline(second)]
    ids = sorted(t.id for t in history if t.id is not None)

    assert queue.newest_transition_id() == ids[-1]
    after_first = queue.transitions_after(ids[0], limit=10)
    assert [row["id"] for row in after_first] == ids[1:]
    assert [row["id"] for row in queue.transitions_after(0, limit=2)] == ids[:2]
    cancel = next(row for row in after_first if row["event"] == "CANCEL")
    assert (cancel["job_id"], cancel["to_status"]) == (first, JobStatus.CANCELLED.value)
