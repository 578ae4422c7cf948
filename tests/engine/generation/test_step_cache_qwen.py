"""Step caching (First Block Cache) on the tiny Qwen-Image, a true CFG family: Easel's cached
image is stock `QwenImagePipeline`'s with the same hook and threshold (the prompt's call in
the "cond" cache context, the negative prompt's in "uncond", as the stock loop names them),
and a cached job paused mid-run resumes in a fresh runner to the uninterrupted cached image,
both contexts' state carried by the checkpoint.

The tiny model's random blocks change a lot from step to step: at 0.8 (the threshold
override) 4 steps run [full, skip, skip, full] in both contexts (asserted below); at the
"fast" threshold none is skipped."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers.hooks import FirstBlockCacheConfig

from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.loop import step_cache
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.tiny_architectures import (
    generate,
    go_on,
    max_diff,
    model_info,
    params_for,
    pause_at,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT, THRESHOLD = 4, 2, 0.8
DECISIONS = [True, False, False, True]  # per step, in each context: all blocks ran or cached


def cached_params(**changes: Any) -> GenerationParams:
    base = {"steps": STEPS, "cfg": 4.0, "width": 64, "height": 48, "seed": 1}
    return params_for("m", **{**base, "speed": "fast", "speed_threshold": THRESHOLD, **changes})


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.qwen import write_tiny_qwen

    return write_tiny_qwen(tmp_path_factory.mktemp("cached-qwen") / "qwen")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder, "m")


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


def stock(folder: Path, params: GenerationParams) -> tuple[np.ndarray, list[dict[str, bool]]]:
    """Stock `QwenImagePipeline`'s image with First Block Cache as its documentation applies
    it, and each step's decision per cache context (True: all blocks ran)."""
    from diffusers import QwenImagePipeline

    pipe: Any = QwenImagePipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=params.cache_threshold))
    decisions: list[dict[str, bool]] = []

    def record(_pipe: Any, _i: int, _t: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        saved = step_cache.saved(pipe)
        decisions.append({name: state["should_compute"] for name, state in saved.items()})
        return kwargs

    image = pipe(
        params.prompt, negative_prompt=params.negative_prompt, true_cfg_scale=params.cfg,
        height=params.height, width=params.width, num_inference_steps=params.steps,
        generator=torch.Generator().manual_seed(params.seed), callback_on_step_end=record,
    ).images[0]  # fmt: skip
    return pixels(image), decisions


def test_a_cached_qwen_image_job_draws_the_stock_pipelines_image_with_the_same_hook(
    runner: Runner, folder: Path, tmp_path: Path
) -> None:
    params = cached_params()
    ours = generate(runner, params, tmp_path, "cached")
    theirs, decisions = stock(folder, params)
    assert decisions == [{"cond": full, "uncond": full} for full in DECISIONS]  # steps skipped
    assert max_diff(ours, theirs) == 0
    uncached = generate(runner, replace(params, speed="off", speed_threshold=0.0), tmp_path, "o")
    assert max_diff(ours, uncached) > 0  # so caching changed the image: the hook ran


def test_a_paused_cached_qwen_image_job_resumes_in_a_fresh_runner_to_the_uninterrupted_image(
    model: ModelInfo, runner: Runner, tmp_path: Path
) -> None:
    params = cached_params(seed=7)
    out, ckpt = tmp_path / "paused.png", tmp_path / "paused.ckpt"
    paused = runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    cache = load_checkpoint(ckpt, params).checkpoint.step_cache
    # Both branches' residuals of step 1, the last full one, before a step that skips.
    assert set(cache) == {"cond", "uncond"}
    assert not cache["cond"]["should_compute"] and not cache["uncond"]["should_compute"]
    resumed = runner_for(model).run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    whole = generate(runner, params, tmp_path, "whole")
    assert max_diff(pixels(out), whole) == 0
