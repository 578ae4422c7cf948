"""Tiny random models of each architecture, as folders, and helpers to compare images.

Imported by the architecture tests (fixtures are session-scoped: each tiny model is written
once). No hub: HF_HUB_OFFLINE is set before diffusers is imported by any of them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"

from app.engine.generation.device import CPU
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSource, detected
from app.engine.generation.load.pipelines import SingleFileConfigs
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from app.testing.images import max_diff, pixels, stock_image
from app.testing.tiny.unet import UNET_ARCHITECTURES

__all__ = ["max_diff", "pixels", "stock_image"]  # the tests import them from here too

STEPS = 4
PAUSE_AT = 2


_TINY_FOLDERS: dict[Architecture, Path] = {}


@pytest.fixture(scope="session")
def tiny_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[Architecture, Path]:
    """One tiny folder per UNet architecture, written once per test process.

    The test modules import this fixture, and pytest keeps an imported fixture per module
    whatever its scope: without the module-level dict, each of the 13 modules wrote all three
    again. The tests only read or copy the folders."""
    from app.testing.tiny.unet import write_tiny_pipeline

    if not _TINY_FOLDERS:
        root = tmp_path_factory.mktemp("arch-models")
        for arch in UNET_ARCHITECTURES:
            _TINY_FOLDERS[arch] = write_tiny_pipeline(root / arch.value, architecture=arch)
    return dict(_TINY_FOLDERS)


CONFIG_NAMES = {Architecture.SD1: "sd1", Architecture.SD2: "sd2-v", Architecture.SDXL: "sdxl"}


@pytest.fixture(scope="module")
def single_files(tmp_path_factory: pytest.TempPathFactory) -> dict[Architecture, Path]:
    from app.testing.tiny.unet import write_tiny_single_file

    folder = tmp_path_factory.mktemp("checkpoints")
    return {
        arch: write_tiny_single_file(folder / f"tiny-{arch.value}.safetensors", architecture=arch)
        for arch in UNET_ARCHITECTURES
    }


@pytest.fixture(scope="module")
def tiny_configs(
    tiny_folders: dict[Architecture, Path], tmp_path_factory: pytest.TempPathFactory
) -> SingleFileConfigs:
    """The tiny models' configs where the real ones are shipped (resources/model_configs)."""
    root = tmp_path_factory.mktemp("model_configs")
    for arch, folder in tiny_folders.items():
        shutil.copytree(
            folder, root / CONFIG_NAMES[arch], ignore=shutil.ignore_patterns("*.safetensors")
        )
    return SingleFileConfigs(root)


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


class Crash(Exception):
    """What `checkpoint_then_crash` raises: the run dies as a killed worker's would."""


def checkpoint_then_crash(step: int) -> Callable[[StepProgress], StepDecision]:
    """A rolling checkpoint at `step`, then a crash at the next one: nothing is written after
    the checkpoint, as when a worker is killed."""

    def decide(progress: StepProgress) -> StepDecision:
        if progress.step == step:
            return StepDecision.CHECKPOINT
        if progress.step == step + 1:
            raise Crash
        return StepDecision.CONTINUE

    return decide


def generate(runner: Runner, params: GenerationParams, folder: Path, name: str) -> np.ndarray:
    out = runner.run(
        params,
        output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt",
        on_step=go_on,
    )
    assert out.kind is OutcomeKind.COMPLETED and out.image_path is not None
    return pixels(out.image_path)
