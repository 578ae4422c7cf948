"""Chains end to end: real worker processes, the bundled model, crashes between commits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

from app.engine.jobs.follow_ups import submit_upscale, submit_variations
from app.engine.jobs.params import DEFAULT_MODEL, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.workers.worker import WorkerConfig, default_runner
from tests.easel_png import read_png_params
from tests.engine.workers.worker_fixtures import (
    Harness,
    harness,
    slow_tiny_runner,
    statuses,
    worker_config,
)

S = JobStatus
pytestmark = pytest.mark.slow
PARAMS = GenerationParams("a red circle on a blue background", steps=6, seed=5)  # 64x64


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path) -> Iterator[Harness]:
    # `queue` has no graph listener: whatever unblocks or cascades here is the workers'
    # own listener (open_queue) or reconciliation.
    with harness(queue, tmp_path / "home") as h:
        yield h


def bundled_config(h: Harness, *, slow: bool = False) -> WorkerConfig:
    factory = slow_tiny_runner if slow else default_runner
    config = worker_config(h.queue, h.home, runner_factory=factory, warm_model=DEFAULT_MODEL)
    return replace(config, torch_threads=1)


def size_of(path: str | None) -> tuple[int, int]:
    with Image.open(path or "") as image:
        return image.size


def succeed_then_crash(queue: JobQueue, job_id: int, output: Path) -> None:
    """The parent's SUCCESS commits; the app dies before any listener runs."""
    assert queue.claim("gone-worker", job_id=job_id) is not None
    changes = {"output_path": str(output)}
    queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id="gone-worker", changes=changes)


def test_generate_then_upscale_as_one_chain(h: Harness, queue: JobQueue) -> None:
    parent = queue.submit(PARAMS)
    child = submit_upscale(queue, parent)  # queued up front: waits BLOCKED
    assert queue.get(child).status == S.BLOCKED
    h.supervisor(config=bundled_config(h)).start()
    done = h.wait_settled(child, timeout=180)
    assert done.status == S.SUCCESS, done.error
    assert size_of(done.output_path) == (128, 128)
    assert (done.progress_step, done.progress_total) == (2, 2)  # 35% of 6 steps
    assert size_of(queue.get(parent).output_path) == (64, 64)
    stored = read_png_params(Path(done.output_path or ""))
    assert (stored.init_image, stored.strength, stored.seed) == (f"job:{parent}", 0.35, 5)
    assert statuses(queue, child) == ["BLOCKED", "PENDING", "PROCESSING", "SUCCESS"]
    assert queue.timeline(child)[1].message == f"every parent succeeded (#{parent})"


def test_the_next_launch_unblocks_a_child_stranded_by_a_crash(
    h: Harness, queue: JobQueue, tmp_path: Path
) -> None:
    parent = queue.submit(PARAMS)
    child = submit_upscale(queue, parent)
    image = tmp_path / "parent.png"
    Image.new("RGB", (64, 64), (200, 20, 20)).save(image)
    succeed_then_crash(queue, parent, image)
    assert queue.get(child).status == S.BLOCKED  # stranded

    report = h.supervisor(config=bundled_config(h)).start()  # the next launch
    assert report.unblocked == [child]
    done = h.wait_settled(child, timeout=180)
    assert done.status == S.SUCCESS and size_of(done.output_path) == (128, 128)
    assert queue.timeline(child)[1].source == "recovery"


def test_cancelling_a_running_parent_cancels_its_children(h: Harness, queue: JobQueue) -> None:
    parent = queue.submit(replace(PARAMS, steps=30))
    upscale = submit_upscale(queue, parent)
    variations = submit_variations(queue, parent, count=2)
    grandchild = submit_upscale(queue, upscale)
    h.supervisor(config=bundled_config(h, slow=True)).start()
    h.wait_progress(parent, 2)
    queue.cancel(parent)
    assert h.wait_status(parent, S.CANCELLED).status == S.CANCELLED
    for child in (upscale, *variations):
        last = h.wait_status(child, S.CANCELLED)
        assert last.status == S.CANCELLED
        assert queue.timeline(child)[-1].message == f"parent #{parent} was cancelled"
    h.wait_status(grandchild, S.CANCELLED)
    assert queue.timeline(grandchild)[-1].message == f"parent #{upscale} was cancelled"


def test_a_parent_image_that_is_gone_fails_the_child_naming_the_file(
    h: Harness, queue: JobQueue, tmp_path: Path
) -> None:
    parent = queue.submit(PARAMS)
    child = submit_upscale(queue, parent)
    gone = tmp_path / "deleted-by-the-user.png"
    succeed_then_crash(queue, parent, gone)
    h.supervisor(config=worker_config(queue, h.home)).start()  # scripted runner: no model
    done = h.wait_settled(child)
    assert done.status == S.FAILED and done.given_up
    assert f"{gone} (the output of job {parent})" in (done.error or "")
