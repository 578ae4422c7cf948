"""The GUI's queue service on a real SQLite file (no Qt needed)."""

from __future__ import annotations

from app.engine.params import GenerationParams
from app.engine.queue import JobQueue
from app.ui.presenters.queue_service import QueueService


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
