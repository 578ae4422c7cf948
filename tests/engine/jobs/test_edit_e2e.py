"""An edit end to end: a child of the job whose image it edits, run by a real worker
process on a tiny Flux.1 Kontext folder, that reads the parent's image as its input; the
PNG records the instruction and the input. (The worker's runner shrinks the stock table of
preferred Kontext resolutions eightfold, as test_kontext.py does, so that a CPU reads the
input in a fraction of a second: the same table for Easel and the stock pipeline.)"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine import paths
from app.engine.jobs.follow_ups import NewJob, submit_with_follow_ups
from app.engine.jobs.graph import parents_of
from app.engine.jobs.params import DEFAULT_MODEL, KIND_EDIT, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.kinds import RunnerLike
from app.engine.workers.worker import default_runner
from tests.engine.workers.worker_fixtures import Harness, harness, statuses, worker_config

pytestmark = pytest.mark.slow
PARENT = GenerationParams("a red circle on a blue background", steps=2, seed=5)  # 64x64


def small_table_runner() -> RunnerLike:
    """The real runner, in a worker whose Kontext table is test_kontext.py's small one."""
    from diffusers.pipelines.flux import pipeline_flux_kontext

    table = pipeline_flux_kontext.PREFERRED_KONTEXT_RESOLUTIONS
    pipeline_flux_kontext.PREFERRED_KONTEXT_RESOLUTIONS = [(w // 8, h // 8) for w, h in table]
    return default_runner()


@pytest.fixture
def h(queue: JobQueue, easel_home: Path) -> Iterator[Harness]:
    with harness(queue, easel_home) as h:
        yield h


def test_an_edit_of_a_job_is_its_child_and_a_worker_draws_it(h: Harness, queue: JobQueue) -> None:
    from app.testing.tiny.kontext import write_tiny_kontext

    write_tiny_kontext(paths.models_dir() / "kontext")
    parent = queue.submit(PARENT)
    edit = GenerationParams(
        "make it night", model="kontext", steps=2, cfg=3.5, seed=7, kind=KIND_EDIT,
        init_image=f"job:{parent}",
    )  # fmt: skip
    [child] = submit_with_follow_ups(queue, NewJob(edit, parents=[parent])).jobs
    assert queue.get(child).status == JobStatus.BLOCKED and parents_of(queue, child) == [parent]
    config = worker_config(h.queue, h.home, runner_factory=small_table_runner)
    h.supervisor(config=replace(config, torch_threads=1, warm_model=DEFAULT_MODEL)).start()
    done = h.wait_settled(child, timeout=240)
    assert done.status == JobStatus.SUCCESS, done.error
    assert statuses(queue, child) == ["BLOCKED", "PENDING", "PROCESSING", "SUCCESS"]
    from PIL import Image

    with Image.open(done.output_path or "") as image:
        assert image.size == (64, 64)
        text = image.info["parameters"]
    assert text.startswith("make it night\n") and f"Edit image: job:{parent}" in text
