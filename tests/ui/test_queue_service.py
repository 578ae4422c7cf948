"""The GUI's queue service on a real SQLite file (no Qt needed)."""

from __future__ import annotations

import pytest

from app.engine.jobs.durations import running_time
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.models.db import Database
from app.ui.presenters.queue_service import QueueService
from app.ui.presenters.rows import JobRow

S = JobStatus


def test_count_queues_several_jobs_with_seeds_counting_up(queue: JobQueue) -> None:
    service = QueueService(opener=lambda: queue, max_attempts=2)
    outcome = service.submit(GenerationParams("a red circle", seed=10), count=3)
    jobs = [queue.get(job_id) for job_id in outcome.job_ids]
    assert [job.seed for job in jobs] == [10, 11, 12]
    assert {job.max_attempts for job in jobs} == {2}


def test_bad_input_queues_nothing_and_says_why(queue: JobQueue) -> None:
    service = QueueService(opener=lambda: queue, max_attempts=3)
    outcome = service.submit(GenerationParams("a red circle", width=70), count=3)
    assert outcome.job_ids == ()
    assert len(outcome.errors) == 1 and outcome.errors[0] == "Width 70 is not a multiple of 8"
    assert queue.jobs() == []


def test_what_a_worker_would_refuse_is_refused_at_submit(queue: JobQueue) -> None:
    from app.engine.generation.request_checks import check_runnable
    from app.engine.settings import load_settings

    service = QueueService(
        opener=lambda: queue,
        check=lambda params: check_runnable(params, load_settings().model_search_path()),
    )
    outcome = service.submit(GenerationParams("a red circle <lora:inky>"), count=2)
    assert outcome.job_ids == () and "LoRA 'inky' was not found" in outcome.errors[0]
    outcome = service.submit(GenerationParams("a red circle", width=512, height=512))
    assert "512x512 is too large for a model trained at 64x64" in outcome.errors[0]
    assert queue.jobs() == []
    assert len(service.submit(GenerationParams("a red circle")).job_ids) == 1


class Clock:
    """The queue's clock, moved by hand: the history's times are exactly what we set."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_duration_is_the_running_time_over_every_attempt(db: Database) -> None:
    clock = Clock()
    queue = JobQueue(db, clock=clock)
    service = QueueService(opener=lambda: queue)
    job_id = queue.submit(GenerationParams("a red circle"))
    clock.now += 30  # waiting in the queue is not running time
    assert queue.claim("w1") is not None
    clock.now += 40
    queue.pause(job_id)  # PROCESSING -> PAUSING: the first stretch ends here
    clock.now += 2
    queue.fire(job_id, JobEvent.STOPPED, source="test")
    clock.now += 300  # paused for five minutes: not running time either
    queue.resume(job_id)
    assert queue.claim("w2") is not None
    clock.now += 15
    running = service.job(job_id)
    assert running is not None and running.duration_s(now=clock.now + 5) == 60.0  # 40 + 20
    queue.fire(job_id, JobEvent.COMPLETE, source="test", worker_id="w2")
    done = service.job(job_id)
    assert done is not None and done.duration_s(now=clock.now + 500) == 55.0  # 40 + 15
    page = service.snapshot(None, 10, watch=[job_id])
    assert page.rows[0].duration_s() == 55.0 and page.updates[job_id] == done


def test_a_job_that_never_ran_has_no_duration(queue: JobQueue) -> None:
    service = QueueService(opener=lambda: queue)
    job_id = queue.submit(GenerationParams("a red circle"))
    row = service.job(job_id)
    assert row is not None and row.duration_s() is None


def test_running_time_adds_the_processing_stretches() -> None:
    history = [(S.PENDING, 0.0), (S.PROCESSING, 10.0), (S.TIMEOUT, 25.0), (S.PENDING, 26.0),
               (S.PROCESSING, 30.0), (S.SUCCESS, 34.5)]  # fmt: skip
    assert running_time(history) == (19.5, None)
    assert running_time(history[:-1]) == (15.0, 30.0)  # still running since 30
    assert running_time([]) == (0.0, None)


def test_a_job_claimed_between_the_page_and_the_queued_reads_is_listed_as_running(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The page said PENDING, the queued list (read next) no longer had it: the list dropped
    # the row for one refresh, and with it the selection (the window never showed its image).
    service = QueueService(opener=lambda: queue)
    claimed, waiting = queue.submit_many([GenerationParams("a fox"), GenerationParams("an owl")])
    in_order = service.queued_in_order

    def claim_first(limit: int) -> tuple[JobRow, ...]:
        assert queue.claim("w1") is not None  # a worker, between the two reads
        return in_order(limit)

    monkeypatch.setattr(service, "queued_in_order", claim_first)
    snap = service.snapshot(None, 10, watch=[claimed, waiting])
    assert snap.queued is not None and [r.id for r in snap.queued] == [waiting]
    shown = {row.id: row.status for row in snap.rows}
    assert shown == {claimed: S.PROCESSING, waiting: S.PENDING}
    assert {i: r.status for i, r in snap.updates.items() if r} == shown
