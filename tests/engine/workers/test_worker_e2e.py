"""End to end: real worker processes running the real runner on the tiny pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.worker import WorkerConfig
from tests.engine.conftest import TINY_MODEL
from tests.engine.workers.worker_fixtures import (
    Harness,
    harness,
    link_model,
    slow_tiny_runner,
    statuses,
    worker_config,
)

S = JobStatus
pytestmark = pytest.mark.slow


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path, tiny_model_dir: Path, easel_home: Path) -> Iterator[Harness]:
    link_model(tiny_model_dir, easel_home)
    with harness(queue, tmp_path / "home") as h:
        yield h


def real_config(h: Harness) -> WorkerConfig:
    config = worker_config(h.queue, h.home, runner_factory=slow_tiny_runner, warm_model=TINY_MODEL)
    return replace(config, torch_threads=1)


def pixels(path: str | None) -> bytes:
    with Image.open(path or "") as image:
        return image.tobytes()


def test_pause_stop_start_resume_gives_the_image_of_an_uninterrupted_run(
    h: Harness, queue: JobQueue
) -> None:
    params = GenerationParams(
        "a red circle", model=TINY_MODEL, steps=12, width=32, height=32, seed=5
    )
    first = h.supervisor(config=real_config(h))
    first.start()
    reference = h.wait_settled(queue.submit(params), timeout=120)
    assert reference.status == S.SUCCESS

    job_id = queue.submit(params)
    h.wait_progress(job_id, 3)
    queue.pause(job_id)
    paused = h.wait_status(job_id, S.PAUSED)
    assert paused.checkpoint_path and Path(paused.checkpoint_path).is_file()
    first.shutdown(timeout=10)  # the app closes...
    h.supervisors.remove(first)

    h.supervisor(config=real_config(h)).start()  # ...and starts again
    queue.resume(job_id)
    job = h.wait_settled(job_id, timeout=120)
    assert job.status == S.SUCCESS
    assert pixels(job.output_path) == pixels(reference.output_path)
    assert job.output_path != reference.output_path
    assert statuses(queue, job_id) == [
        "PENDING", "PROCESSING", "PAUSING", "PAUSED", "PENDING", "PROCESSING", "SUCCESS"
    ]  # fmt: skip
    assert not Path(paused.checkpoint_path).exists()  # removed once the image was written
