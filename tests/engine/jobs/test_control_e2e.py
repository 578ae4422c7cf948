"""A ControlNet job end to end: its control image stored with it, read back by a real
worker process on the bundled model through a ControlNet installed in the models folder;
the image is the one the runner makes in this process, and the PNG says how it was guided."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.engine.jobs.params import (
    DEFAULT_MODEL,
    ControlLayer,
    GenerationParams,
    encode_control,
)
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.states import JobStatus
from app.engine.paths import bundled_models_dir, models_dir
from tests.engine.jobs.test_inpaint_e2e import bundled_config
from tests.engine.workers.worker_fixtures import Harness, harness

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning"),
]


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path) -> Iterator[Harness]:
    with harness(queue, tmp_path / "home") as h:
        yield h


def install_bundled_controlnet(name: str) -> Path:
    """A random ControlNet made from the bundled model's UNet, as a diffusers folder."""
    import torch
    from diffusers import ControlNetModel, UNet2DConditionModel

    model = bundled_models_dir() / DEFAULT_MODEL
    unet = UNet2DConditionModel.from_pretrained(model / "unet")
    # The condition embedding brings the image down as much as the model's VAE does.
    vae_levels = len(json.loads((model / "vae" / "config.json").read_text())["block_out_channels"])
    channels = (8, 8, 16, 16, 32)[:vae_levels]
    with torch.random.fork_rng():
        torch.manual_seed(4)
        net = ControlNetModel.from_unet(unet, conditioning_embedding_out_channels=channels)
        with torch.no_grad():
            for parameter in net.parameters():
                parameter.copy_(torch.randn_like(parameter) * 0.05)
    folder = models_dir() / "controlnet" / name
    net.save_pretrained(folder)
    return folder


def edges_png() -> bytes:
    array = np.zeros((64, 64, 3), dtype=np.uint8)
    array[20:22, 8:56] = 255
    array[8:56, 40:42] = 255
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_controlnet_job_is_run_by_a_real_worker_from_its_stored_control_image(
    h: Harness, queue: JobQueue, tmp_path: Path
) -> None:
    from app.engine.generation.device import CPU
    from app.engine.generation.outcome import StepDecision
    from app.engine.generation.runner import Runner

    install_bundled_controlnet("tiny-edges")
    png = edges_png()
    layer = ControlLayer("upload:" + hashlib.sha256(png).hexdigest(), "tiny-edges", "canny",
                         0.9, 0.0, 0.8)  # fmt: skip
    params = GenerationParams("a red circle", steps=6, seed=5, control=encode_control([layer]))
    job_id = queue.submit(params, inputs=RunInputs(control_images=[png]))
    h.supervisor(config=bundled_config(h)).start()
    done = h.wait_settled(job_id, timeout=180)
    assert done.status == JobStatus.SUCCESS, done.error
    with Image.open(done.output_path or "") as image:
        worker_image = np.asarray(image.convert("RGB")).astype(np.int16)
        text = image.info["parameters"]
    assert 'ControlNet 0: "Module: canny, Model: tiny-edges, Weight: 0.9, Guidance Start: 0.0, ' \
        'Guidance End: 0.8"' in text  # fmt: skip
    runner = Runner(device=CPU, threads=1)
    stored = replace(params, seed=done.seed)
    here = runner.run(
        stored, RunInputs(control_images=[png]), output_path=tmp_path / "here.png",
        checkpoint_path=tmp_path / "here.ckpt", on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    with Image.open(here.image_path or "") as image:
        assert int(np.abs(np.asarray(image.convert("RGB")) - worker_image).max()) == 0
    plain = runner.run(
        replace(stored, control=""), output_path=tmp_path / "plain.png",
        checkpoint_path=tmp_path / "plain.ckpt", on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    with Image.open(plain.image_path or "") as image:
        assert int(np.abs(np.asarray(image.convert("RGB")) - worker_image).max()) > 0
