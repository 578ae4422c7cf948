"""Learned ETAs: medians of the exact match, then nearer matches scaled; resumed jobs ignored."""

from __future__ import annotations

from pathlib import Path

from app.engine.history.eta import Estimator, Sample, job_estimate, learned, queue_estimate
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.models.opening import open_database


def sample(seconds: float, steps: int = 20, size: int = 512, device: str = "a") -> Sample:
    return Sample("sd15", size, size, steps, device, seconds)


def test_the_exact_match_gives_its_median_once_enough_ran() -> None:
    estimator = Estimator()
    for seconds in (10, 30, 11, 12):
        estimator.add(sample(seconds))
    assert estimator.estimate("sd15", 512, 512, 20, "a") == 11.5


def test_too_few_exact_matches_fall_back_to_the_same_model_and_size_scaled_by_steps() -> None:
    estimator = Estimator()
    for seconds in (10, 12, 14):
        estimator.add(sample(seconds, steps=20, device="b"))
    assert estimator.estimate("sd15", 512, 512, 40, "a") == 24.0  # 0.6 s a step, 40 steps


def test_an_unknown_model_is_scaled_by_pixels_and_steps() -> None:
    estimator = Estimator()
    estimator.add(sample(10, steps=10, size=256))
    assert estimator.estimate("other", 512, 512, 20, "a") == 80.0  # 4x pixels, 2x steps
    assert Estimator().estimate("other", 512, 512, 20, "a") is None


def test_learning_reads_successes_and_skips_resumed_jobs(tmp_path: Path) -> None:
    clock = [1000.0]
    queue = JobQueue(open_database(tmp_path / "easel.db"), clock=lambda: clock[0])
    for paused_on_the_way in (False, False, True):
        job_id = queue.submit(GenerationParams("a cat", steps=20, width=64, height=64))
        queue.claim("host:1:t")
        if paused_on_the_way:
            queue.pause(job_id)
            queue.fire(job_id, JobEvent.STOPPED, source="worker")
            queue.resume(job_id)
            queue.claim("host:1:t")
        clock[0] += 5.0 if paused_on_the_way else 10.0
        queue.fire(job_id, JobEvent.COMPLETE, source="worker")
    estimator = learned(queue)
    assert estimator.estimate("easel-tiny", 64, 64, 40, "host") == 20.0  # from the two 10 s runs
    pending = [queue.get(queue.submit(GenerationParams("next", steps=20, width=64, height=64)))]
    assert queue_estimate(estimator, pending).line() == "1 queued, about 10 s"
    queue.db.dispose()


def test_the_queue_estimate_follows_a_running_job_as_it_runs(tmp_path: Path) -> None:
    """Issue 28.3: the ETA sat still for minutes, then jumped; a running job counts what is left."""
    estimator = Estimator()
    for _ in range(3):
        estimator.add(Sample("easel-tiny", 64, 64, 20, "host", 10.0))
    queue = JobQueue(open_database(tmp_path / "easel.db"))
    running = queue.submit(GenerationParams("a cat", steps=20, width=64, height=64))
    queue.submit(GenerationParams("a dog", steps=20, width=64, height=64))
    queue.claim("host:1:t")
    seen = []
    for step in (0, 5, 15):
        queue.report_progress(running, "host:1:t", step, 20)
        jobs = [queue.get(running), *queue.jobs([JobStatus.PENDING], limit=None)]
        seen.append(queue_estimate(estimator, jobs, device="host").seconds)
    assert seen == [20.0, 17.5, 12.5]  # 10 s queued + what is left of the running 10 s


def test_a_models_load_is_learned_apart_and_expected_only_where_no_worker_holds_it(
    tmp_path: Path,
) -> None:
    clock = [1000.0]
    queue = JobQueue(open_database(tmp_path / "easel.db"), clock=lambda: clock[0])
    for message in ("wrote a.png; model loaded in 6.0 s", "wrote b.png; model already loaded"):
        job_id = queue.submit(GenerationParams("a cat", steps=20, width=64, height=64))
        queue.claim("host:1:t")
        clock[0] += 16.0 if "loaded in" in message else 10.0
        queue.fire(job_id, JobEvent.COMPLETE, source="worker", message=message)
    estimator = learned(queue)
    assert estimator.estimate("easel-tiny", 64, 64, 20, "host") == 10.0  # the load taken off
    assert estimator.load_estimate("easel-tiny") == 6.0
    assert estimator.load_estimate("never-loaded") == 6.0  # any model's, until it loads once
    waiting = [
        queue.get(queue.submit(GenerationParams("next", steps=20, width=64, height=64)))
        for _ in range(2)
    ]
    assert job_estimate(estimator, waiting[0], held={"easel-tiny"}) == 10.0
    assert job_estimate(estimator, waiting[0], held=set()) == 16.0
    # The queue loads a model nobody holds once, not once per job.
    assert queue_estimate(estimator, waiting, held=set()).seconds == 26.0
    assert queue_estimate(estimator, waiting, held={"easel-tiny"}).seconds == 20.0
    queue.db.dispose()


def test_the_models_each_live_worker_holds_are_read_from_the_worker_table(tmp_path: Path) -> None:
    import json

    from sqlalchemy import insert

    from app.models.tables import WORKER

    queue = JobQueue(open_database(tmp_path / "easel.db"), clock=lambda: 1000.0)
    rows = [("gpu-1:1:a", ["sdxl", "sd15"], 999.0), ("gpu-2:2:b", ["sd15"], 998.0),
            ("gone:3:c", ["flux"], 500.0)]  # fmt: skip
    with queue.db.write() as conn:
        for worker_id, models, seen in rows:
            conn.execute(insert(WORKER).values(
                id=worker_id, machine="m", state="idle", started_at=seen, last_seen_at=seen,
                models=json.dumps(models),
            ))  # fmt: skip
    assert queue.models_held() == {"sdxl": ["gpu-1:1:a"], "sd15": ["gpu-1:1:a", "gpu-2:2:b"]}
    queue.db.dispose()
