"""img2img on SD 2.x v-prediction and SDXL: equal to the stock img2img pipelines."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import StableDiffusionImg2ImgPipeline, StableDiffusionXLImg2ImgPipeline
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.runner import Runner
from app.engine.jobs.params import SCHEDULERS, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.tiny_architectures import (
    go_on,
    model_info,
    params_for,
    pixels,
    runner_for,
    tiny_folders,
)

__all__ = ["tiny_folders"]  # the fixture, imported for pytest

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STOCK: dict[Architecture, Any] = {
    Architecture.SD2: StableDiffusionImg2ImgPipeline,
    Architecture.SDXL: StableDiffusionXLImg2ImgPipeline,
}


def img2img_params(scheduler: str) -> GenerationParams:
    return params_for("m", scheduler, init_image="job:1", strength=0.6)


def ours(runner: Runner, params: GenerationParams, folder: Path, *decisions: StepDecision) -> Path:
    """Run to the end; with `decisions`, pause at step 2 first and resume."""
    out, ckpt = folder / "ours.png", folder / "ours.ckpt"
    for _ in decisions:
        paused = runner.run(
            params, RunInputs(init_image=init_png()), output_path=out, checkpoint_path=ckpt,
            on_step=lambda p: StepDecision.PAUSE if p.step == 2 else StepDecision.CONTINUE,
        )  # fmt: skip
        assert paused.kind is OutcomeKind.PAUSED
    done = runner.run(
        params, RunInputs(init_image=init_png()), output_path=out, checkpoint_path=ckpt,
        on_step=go_on,
    )  # fmt: skip
    assert done.kind is OutcomeKind.COMPLETED
    return out


def stock(runner: Runner, arch: Architecture, params: GenerationParams) -> np.ndarray:
    pipe = runner.load("m").pipe
    stock_pipe: Any = STOCK[arch](**pipe.components)
    stock_pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    stock_pipe.set_progress_bar_config(disable=True)
    image = stock_pipe(
        params.prompt,
        image=Image.open(io.BytesIO(init_png())),
        strength=params.strength,
        negative_prompt=params.negative_prompt,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]
    return pixels(image)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("arch", [Architecture.SD2, Architecture.SDXL], ids=lambda a: a.value)
def test_img2img_equals_the_stock_pipeline_and_resumes_exactly(
    tiny_folders: dict[Architecture, Path], tmp_path: Path, arch: Architecture, scheduler: str
) -> None:
    runner = runner_for(model_info(tiny_folders[arch]))
    params = img2img_params(scheduler)
    expected = stock(runner, arch, params)
    assert int(np.abs(pixels(ours(runner, params, tmp_path)) - expected).max()) == 0
    resumed = ours(runner, params, tmp_path / "resumed", StepDecision.PAUSE)
    assert int(np.abs(pixels(resumed) - expected).max()) == 0
