"""An inpaint end to end: a child of the job whose image it repaints, its mask stored with
it and read back by a real worker process on the bundled model; the PNG says so."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.engine.jobs.follow_ups import NewJob, submit_with_follow_ups
from app.engine.jobs.graph import parents_of
from app.engine.jobs.params import DEFAULT_MODEL, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.states import JobStatus
from app.engine.workers.worker import WorkerConfig, default_runner
from tests.easel_png import read_png_params
from tests.engine.workers.worker_fixtures import Harness, harness, statuses, worker_config

pytestmark = pytest.mark.slow
PARAMS = GenerationParams("a red circle on a blue background", steps=6, seed=5)  # 64x64
BOX = (8, 8, 24, 24)


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path) -> Iterator[Harness]:
    with harness(queue, tmp_path / "home") as h:
        yield h


def bundled_config(h: Harness) -> WorkerConfig:
    config = worker_config(h.queue, h.home, runner_factory=default_runner, warm_model=DEFAULT_MODEL)
    return replace(config, torch_threads=1)


def mask_png() -> bytes:
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, BOX)
    buffer = io.BytesIO()
    mask.save(buffer, format="PNG")
    return buffer.getvalue()


def pixels(path: str | None) -> np.ndarray:
    with Image.open(path or "") as image:
        return np.asarray(image.convert("RGB")).astype(np.int16)


def test_an_only_masked_inpaint_of_a_job_repaints_the_box_and_keeps_the_rest(
    h: Harness, queue: JobQueue
) -> None:
    parent = queue.submit(PARAMS)
    params = replace(
        PARAMS, prompt="a green square", init_image=f"job:{parent}", strength=0.9,
        mask_blur=2, only_masked=True, mask_padding=4,
    )  # fmt: skip
    [child] = submit_with_follow_ups(
        queue, NewJob(params, parents=[parent], inputs=RunInputs(mask=mask_png()))
    ).jobs
    assert queue.get(child).status == JobStatus.BLOCKED and parents_of(queue, child) == [parent]
    h.supervisor(config=bundled_config(h)).start()
    done = h.wait_settled(child, timeout=180)
    assert done.status == JobStatus.SUCCESS, done.error
    assert statuses(queue, child) == ["BLOCKED", "PENDING", "PROCESSING", "SUCCESS"]
    before, after = pixels(queue.get(parent).output_path), pixels(done.output_path)
    far = np.ones((64, 64), dtype=bool)
    far[: BOX[3] + 8, : BOX[2] + 8] = False  # the box, its padding and its blurred edge
    assert int(np.abs(after[far] - before[far]).max()) == 0  # pasted back: untouched
    inside = (slice(BOX[1], BOX[3]), slice(BOX[0], BOX[2]))
    assert int(np.abs(after[inside] - before[inside]).max()) > 0  # repainted
    stored = read_png_params(Path(done.output_path or ""))
    assert (stored.mask, stored.only_masked, stored.mask_padding) == (
        queue.get(child).mask, True, 4,
    )  # fmt: skip
    with Image.open(done.output_path or "") as image:
        text = image.info["parameters"]
    assert "Denoising strength: 0.9, Mask blur: 2, Inpaint area: Only masked, " in text
    assert "Masked area padding: 4" in text
