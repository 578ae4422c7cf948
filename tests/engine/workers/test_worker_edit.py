"""An edit job end to end through a real worker (issue 37 "Show"): a Qwen-Image-Edit Plus
edit of two pictures, submitted on the queue as the command line submits it (`submit
--edit-image A --edit-image B`), is claimed by a spawned worker, which reads both pictures
from the database and writes stock `QwenImageEditPlusPipeline`'s image of the same two
pictures; the same job, its worker SIGKILLed after its first rolling checkpoint, is resumed
by another worker to the very same image.

The tiny model's input area is shrunk as `test_qwen_edit.py` shrinks it, here and in the
worker (its runner factory applies the same patch in the spawned process)."""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from diffusers import QwenImageEditPlusPipeline
from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit, pipeline_qwenimage_edit_plus
from PIL import Image

from app.engine.generation.families.qwen.processor import image_only_processor
from app.engine.jobs.follow_ups import submit_with_follow_ups
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.store.edits import EditSettings, picture_edit_job
from app.engine.workers.liveness import WorkerIdentity
from app.engine.workers.worker import RunnerLike, WorkerConfig, default_runner
from app.testing.step_hooks import SlowStepRunner
from app.testing.tiny.qwen import write_tiny_qwen_edit
from tests.engine.generation.test_img2img import init_png
from tests.engine.workers.test_worker_e2e import pixels
from tests.engine.workers.worker_fixtures import (
    Harness,
    harness,
    link_model,
    statuses,
    worker_config,
)

S = JobStatus
pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning"),
]
MODEL = "plus"
STEPS, EVERY = 6, 2  # a rolling checkpoint every 2 steps: 4 slow steps left to kill in
STEP_DELAY_S = 0.3  # slow enough that the kill lands mid-denoise on a busy machine
SIZE = (64, 48)
PICTURES = (init_png(SIZE), init_png((48, 64)))  # the edited one, then a further one
SETTINGS = EditSettings(
    "put the cat of picture 2 on the sofa", model=MODEL, steps=STEPS, cfg=4.0, seed=1234,
    more_images=PICTURES[1:],
)  # fmt: skip
STOCK_DIMENSIONS = pipeline_qwenimage_edit.calculate_dimensions
PLUS_DIMENSIONS = pipeline_qwenimage_edit_plus.calculate_dimensions


def small_dimensions(target_area: int, ratio: float) -> Any:
    return STOCK_DIMENSIONS(target_area // 256, ratio)


def small_plus_dimensions(target_area: int, ratio: float) -> Any:
    return PLUS_DIMENSIONS(target_area // 256, ratio)


def shrink_input_area() -> None:
    pipeline_qwenimage_edit.calculate_dimensions = small_dimensions
    pipeline_qwenimage_edit_plus.calculate_dimensions = small_plus_dimensions


def small_area_runner() -> RunnerLike:
    """The worker's runner factory (module level, so it pickles by name): the real runner,
    slowed so the test can act mid-denoise, on the shrunk input area."""
    shrink_input_area()
    return SlowStepRunner(default_runner(), STEP_DELAY_S)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen_edit(tmp_path_factory.mktemp("plus") / MODEL, plus=True)


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path, folder: Path, easel_home: Path) -> Iterator[Harness]:
    link_model(folder, easel_home)
    with harness(queue, tmp_path / "home") as h:
        yield h


def rolling_config(h: Harness) -> WorkerConfig:
    config = worker_config(h.queue, h.home, runner_factory=small_area_runner, warm_model=MODEL)
    return replace(config, torch_threads=1, checkpoint_interval_s=0, checkpoint_every_steps=EVERY)


def submit_edit(queue: JobQueue) -> int:
    """As `submit --edit-image A --edit-image B --size 64x48` stores it (no model check)."""
    job = picture_edit_job(PICTURES[0], SETTINGS, size=SIZE)
    [job_id] = submit_with_follow_ups(queue, job, source="cli").jobs
    return job_id


def stock_pixels(folder: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """Stock Edit Plus called with the two pictures, as its documentation shows, and the
    job's negative prompt (empty: Easel hands the stock pipeline the empty text, so true CFG
    runs), on one thread as the worker runs (another thread count sums in another order)."""
    monkeypatch.setattr(pipeline_qwenimage_edit, "calculate_dimensions", small_dimensions)
    monkeypatch.setattr(pipeline_qwenimage_edit_plus, "calculate_dimensions", small_plus_dimensions)
    processor = image_only_processor(folder / "processor")
    pipe: Any = QwenImageEditPlusPipeline.from_pretrained(
        folder, processor=processor, dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        image = pipe(
            image=[Image.open(io.BytesIO(png)) for png in PICTURES],
            prompt=SETTINGS.instruction, negative_prompt="", true_cfg_scale=SETTINGS.cfg,
            num_inference_steps=STEPS, width=SIZE[0], height=SIZE[1],
            generator=torch.Generator("cpu").manual_seed(SETTINGS.seed),
        ).images[0]  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    return bytes(image.tobytes())


def rolling_files(h: Harness, job_id: int) -> list[Path]:
    return sorted((h.home / "checkpoints").glob(f"job-{job_id}-*.ckpt"))


def test_an_edit_plus_edit_of_two_pictures_through_a_real_worker_is_stock_and_survives_a_kill(
    h: Harness, queue: JobQueue, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two workers, both warm before the kill, so the other one resumes without a cold start.
    h.supervisor(config=rolling_config(h), workers=2).start()
    whole = h.wait_settled(submit_edit(queue), timeout=120)
    assert whole.status == S.SUCCESS, queue.timeline(whole.id or 0)[-1].message
    assert pixels(whole.output_path) == stock_pixels(folder, monkeypatch)  # max diff 0

    job_id = submit_edit(queue)
    h.wait_for(lambda: bool(rolling_files(h, job_id)), timeout=60, what="a rolling checkpoint")
    killed_worker = WorkerIdentity.parse(queue.get(job_id).worker_id)
    assert killed_worker is not None
    os.kill(killed_worker.pid, signal.SIGKILL)
    killed = h.wait_settled(job_id, timeout=120)
    assert killed.status == S.SUCCESS and killed.worker_id != str(killed_worker)
    assert statuses(queue, job_id) == [
        "PENDING", "PROCESSING", "TIMEOUT", "PENDING", "PROCESSING", "SUCCESS"
    ]  # fmt: skip
    assert queue.timeline(job_id)[-1].message.startswith("resumed from step ")
    assert pixels(killed.output_path) == pixels(whole.output_path)
