"""A video job is as durable as an image job: real workers, a tiny random Wan 2.1 (text to
video) and a tiny random Wan 2.2 TI2V given an input image (image to video).

A worker SIGKILLed after a rolling checkpoint of the clip's latents is replaced by another
worker process, which resumes from that checkpoint and writes the very clip an
uninterrupted run writes: every frame of the MP4 equal, decoding (PyAV) to the frames
asked for, and the first-frame PNG beside it equal too. The image-to-video clip's input
image is stored with the job and its latents ride in the checkpoint.
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
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs
from app.engine.jobs.states import JobStatus
from app.engine.outputs.video import decode_frames, first_frame_path
from app.engine.workers.kinds import RunnerLike
from app.engine.workers.supervisor import Supervisor
from app.engine.workers.worker import WorkerConfig, default_runner
from app.testing.step_hooks import SlowStepRunner
from tests.engine.generation.test_wan_image import PNG, WITH_IMAGE
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


# Each clip: its job and the images stored with it. The model is the folder's name.
CLIPS = {
    "text to video": (PARAMS, NO_INPUTS),
    "image to video": (
        replace(PARAMS, model="ti2v", init_image=WITH_IMAGE["init_image"]),
        RunInputs(init_image=PNG),
    ),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from app.testing.tiny.wan import write_tiny_wan, write_tiny_wan_ti2v

    root = tmp_path_factory.mktemp("wan-models")
    return [write_tiny_wan(root / "wan"), write_tiny_wan_ti2v(root / "ti2v")]


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path, folders: list[Path], easel_home: Path) -> Iterator[Harness]:
    for folder in folders:
        link_model(folder, easel_home)
    with harness(queue, tmp_path / "home") as h:
        yield h


def rolling_config(h: Harness) -> WorkerConfig:
    config = worker_config(h.queue, h.home, runner_factory=slow_wan_runner, warm_model="wan")
    return replace(config, torch_threads=1, checkpoint_interval_s=0, checkpoint_every_steps=EVERY)


def frames_of(path: str | None) -> list[np.ndarray]:
    assert path is not None
    return [np.asarray(frame) for frame in decode_frames(Path(path))]


def killed_after_a_rolling_save(h: Harness, supervisor: Supervisor, job_id: int) -> int:
    """Kill (SIGKILL) the worker running `job_id` once a rolling save of it is on disk."""
    h.wait_progress(job_id, EVERY + 1)
    checkpoints = h.home / "checkpoints"
    h.wait_for(lambda: any(checkpoints.glob(f"job-{job_id}-*.ckpt")), what="a rolling save")
    [killed] = supervisor.worker_pids()
    os.kill(killed, signal.SIGKILL)
    return killed


def test_killed_video_workers_are_resumed_by_others_to_the_same_clips(
    h: Harness, queue: JobQueue
) -> None:
    """One supervisor for both clips (a worker's start is most of the cost): the
    uninterrupted clips first, then each clip's worker killed after a rolling save. So the
    text-to-video clip's twin runs after the other model's clip, and its resumed MP4 is
    encoded by a fresh worker while the reference's was encoded by a worker with a used
    heap: the encode must not depend on that (`video.X264_WITHOUT_AVX512`)."""
    supervisor = h.supervisor(config=rolling_config(h))
    supervisor.start()
    references = {name: queue.submit(params, inputs=inputs) for name, (params, inputs) in
                  CLIPS.items()}  # fmt: skip
    for name, (params, inputs) in CLIPS.items():
        reference = h.wait_settled(references[name], timeout=180)
        assert reference.status == JobStatus.SUCCESS, name
        job_id = queue.submit(params, inputs=inputs)
        killed = killed_after_a_rolling_save(h, supervisor, job_id)
        job = h.wait_settled(job_id, timeout=180)

        assert job.status == JobStatus.SUCCESS and supervisor.worker_pids() != [killed], name
        assert statuses(queue, job_id) == [
            "PENDING", "PROCESSING", "TIMEOUT", "PENDING", "PROCESSING", "SUCCESS"
        ], name  # fmt: skip
        assert queue.timeline(job_id)[-1].message.startswith("resumed from step "), name
        ours, theirs = frames_of(job.output_path), frames_of(reference.output_path)
        assert len(ours) == len(theirs) == FRAMES, name
        assert all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True)), name
        still_of = [first_frame_path(Path(j.output_path or "")) for j in (job, reference)]
        assert still_of[0].read_bytes() == still_of[1].read_bytes(), name
