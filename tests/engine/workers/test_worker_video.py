"""A video job is as durable as an image job: real workers, a tiny random Wan 2.1.

A worker SIGKILLed after a rolling checkpoint of the clip's latents is replaced by another
worker process, which resumes from that checkpoint and writes the very clip an
uninterrupted run writes: every frame of the MP4 equal, decoding (PyAV) to the frames
asked for, and the first-frame PNG beside it equal too.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.engine.jobs.params import KIND_VIDEO, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.outputs.video import decode_frames, first_frame_path
from app.engine.workers.kinds import RunnerLike
from app.engine.workers.worker import WorkerConfig, default_runner
from app.testing.step_hooks import SlowStepRunner
from tests.engine.workers.worker_fixtures import (
    Harness,
    harness,
    link_model,
    statuses,
    worker_config,
)

pytestmark = pytest.mark.slow
STEPS, EVERY, FRAMES = 6, 2, 9
PARAMS = GenerationParams(
    "a cat walking", model="wan", steps=STEPS, cfg=5.0, width=32, height=32, seed=5,
    kind=KIND_VIDEO, frames=FRAMES,
)  # fmt: skip


def slow_wan_runner() -> RunnerLike:
    """A runner factory for spawned workers (module level, so it pickles by name): the
    real runner, a pause before each step so the test can kill it mid-clip."""
    return SlowStepRunner(default_runner(), 0.3)


@pytest.fixture(scope="module")
def wan_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan

    return write_tiny_wan(tmp_path_factory.mktemp("wan-models") / "wan")


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path, wan_folder: Path, easel_home: Path) -> Iterator[Harness]:
    link_model(wan_folder, easel_home)
    with harness(queue, tmp_path / "home") as h:
        yield h


def rolling_config(h: Harness) -> WorkerConfig:
    config = worker_config(h.queue, h.home, runner_factory=slow_wan_runner, warm_model="wan")
    return replace(config, torch_threads=1, checkpoint_interval_s=0, checkpoint_every_steps=EVERY)


def frames_of(path: str | None) -> list[np.ndarray]:
    assert path is not None
    return [np.asarray(frame) for frame in decode_frames(Path(path))]


def test_a_killed_video_worker_is_resumed_by_another_to_the_same_clip(
    h: Harness, queue: JobQueue
) -> None:
    supervisor = h.supervisor(config=rolling_config(h))
    supervisor.start()
    reference = h.wait_settled(queue.submit(PARAMS), timeout=180)
    assert reference.status == JobStatus.SUCCESS

    job_id = queue.submit(PARAMS)
    h.wait_progress(job_id, EVERY + 1)
    checkpoints = h.home / "checkpoints"
    h.wait_for(lambda: any(checkpoints.glob(f"job-{job_id}-*.ckpt")), what="a rolling save")
    [killed] = supervisor.worker_pids()
    os.kill(killed, signal.SIGKILL)
    job = h.wait_settled(job_id, timeout=180)

    assert job.status == JobStatus.SUCCESS and supervisor.worker_pids() != [killed]
    assert statuses(queue, job_id) == [
        "PENDING", "PROCESSING", "TIMEOUT", "PENDING", "PROCESSING", "SUCCESS"
    ]  # fmt: skip
    assert queue.timeline(job_id)[-1].message.startswith("resumed from step ")
    ours, theirs = frames_of(job.output_path), frames_of(reference.output_path)
    assert len(ours) == len(theirs) == FRAMES
    assert all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))
    stills = [first_frame_path(Path(j.output_path or "")).read_bytes() for j in (job, reference)]
    assert stills[0] == stills[1]
