"""Tiny random models of each architecture, as folders, and helpers to compare images.

Imported by the architecture tests (fixtures are session-scoped: each tiny model is written
once). No hub: HF_HUB_OFFLINE is set before diffusers is imported by any of them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

os.environ["HF_HUB_OFFLINE"] = "1"

from app.engine.generation.architecture import Architecture
from app.engine.generation.device import CPU
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.generation.sources import ModelInfo, ModelSource, detected
from app.engine.params import GenerationParams

STEPS = 4
PAUSE_AT = 2


@pytest.fixture(scope="session")
def tiny_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[Architecture, Path]:
    from app.engine.generation.tiny_model import write_tiny_pipeline

    root = tmp_path_factory.mktemp("arch-models")
    return {
        arch: write_tiny_pipeline(root / arch.value, architecture=arch) for arch in Architecture
    }


def model_info(path: Path, name: str = "") -> ModelInfo:
    return detected(ModelInfo(name or path.stem, path, ModelSource.USER))


def runner_for(model: ModelInfo, **kwargs: Any) -> Runner:
    return Runner(device=CPU, resolve=lambda _name: model, threads=1, **kwargs)


def params_for(model: str, scheduler: str = "Euler", **changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "the cat",
        "negative_prompt": "a dog",
        "model": model,
        "scheduler": scheduler,
        "steps": STEPS,
        "cfg": 7.0,
        "width": 64,
        "height": 64,
        "seed": 1234,
    }
    return GenerationParams(**{**base, **changes})


def go_on(_: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


def pause_at(step: int) -> Callable[[StepProgress], StepDecision]:
    return lambda p: StepDecision.PAUSE if p.step == step else StepDecision.CONTINUE


def generate(runner: Runner, params: GenerationParams, folder: Path, name: str) -> np.ndarray:
    out = runner.run(
        params,
        output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt",
        on_step=go_on,
    )
    assert out.kind is OutcomeKind.COMPLETED and out.image_path is not None
    return pixels(out.image_path)


def pixels(image: Path | Image.Image) -> np.ndarray:
    if isinstance(image, Path):
        with Image.open(image) as opened:
            return np.asarray(opened.convert("RGB")).astype(np.int16)
    return np.asarray(image.convert("RGB")).astype(np.int16)


def max_diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a - b).max())


def stock_image(pipe: Any, params: GenerationParams, **extra: Any) -> np.ndarray:
    """The stock diffusers pipeline's image for `params` (same seed, same scheduler)."""
    import torch

    from app.engine.generation import denoise

    original = pipe.scheduler
    pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    try:
        image = pipe(
            params.prompt,
            negative_prompt=params.negative_prompt,
            num_inference_steps=params.steps,
            guidance_scale=params.cfg,
            width=params.width,
            height=params.height,
            generator=torch.Generator().manual_seed(params.seed),
            **extra,
        ).images[0]
    finally:
        pipe.scheduler = original
    return pixels(image)
