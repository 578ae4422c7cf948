"""Step caching (a job's speed: diffusers' First Block Cache) on the tiny Flux.1 dev-style
model: Easel's cached image is stock `FluxPipeline`'s with the same hook and threshold, a
cached job paused at step k resumes in a fresh process to the uninterrupted cached image
(the cache's state travels in the checkpoint), the hook leaves with its job, and what
cannot be cached is refused.

The tiny model's random blocks change their residual a lot from step to step: at the
"fast" threshold no step is skipped, so these tests set the threshold (the override) to
0.5, where 8 steps run [full, skip, skip, skip, skip, full, skip, skip] (asserted below)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import FluxPipeline
from diffusers.hooks import FirstBlockCacheConfig
from PIL import Image

from app.engine.generation.errors import CheckpointMismatch
from app.engine.generation.files.registry import families
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.loop import step_cache
from app.engine.generation.loop.checkpoint import load_checkpoint, save_checkpoint
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.outputs.image import a1111_parameters
from app.testing.tiny.flux import write_tiny_flux
from tests.engine.generation.tiny_architectures import (
    generate,
    go_on,
    max_diff,
    model_info,
    pause_at,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT, THRESHOLD = 8, 3, 0.5
DECISIONS = [True, False, False, False, False, True, False, False]  # full step or cached


def cached_params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "the cat", "model": "m", "steps": STEPS, "cfg": 3.5, "width": 64,
        "height": 48, "seed": 1, "speed": "fast", "speed_threshold": THRESHOLD,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_flux(tmp_path_factory.mktemp("cached-flux") / "flux-dev")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder)


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


@pytest.fixture(scope="module")
def stock_pipe(folder: Path) -> Any:
    pipe: Any = FluxPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def stock(pipe: Any, params: GenerationParams) -> tuple[np.ndarray, list[bool]]:
    """Stock `FluxPipeline`'s image with First Block Cache as its documentation applies it
    (none when `params` runs uncached), and each step's decision (True: all blocks ran)."""
    threshold = params.cache_threshold
    if threshold:
        pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=threshold))
    decisions: list[bool] = []

    def record(_pipe: Any, _i: int, _t: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        if threshold:
            decisions.append(step_cache.saved(pipe)["cond"]["should_compute"])
        return kwargs

    try:
        image = pipe(
            params.prompt, num_inference_steps=params.steps, guidance_scale=params.cfg,
            height=params.height, width=params.width, callback_on_step_end=record,
            generator=torch.Generator("cpu").manual_seed(params.seed),
        ).images[0]  # fmt: skip
    finally:
        if threshold:
            pipe.transformer.disable_cache()
    return pixels(image), decisions


def test_a_cached_flux_job_draws_stock_fluxpipelines_image_with_the_same_hook(
    runner: Runner, stock_pipe: Any, tmp_path: Path
) -> None:
    params = cached_params()
    ours = generate(runner, params, tmp_path, "cached")
    theirs, decisions = stock(stock_pipe, params)
    assert decisions == DECISIONS  # the cache did skip steps here
    assert max_diff(ours, theirs) == 0
    off = replace(params, speed="off", speed_threshold=0.0)
    uncached = generate(runner, off, tmp_path, "off")
    assert max_diff(ours, uncached) > 0  # so caching changed the image: the hook ran
    # The hook left with the cached job: the uncached one is stock's without a hook.
    assert max_diff(uncached, stock(stock_pipe, off)[0]) == 0


def _resume(model: ModelInfo, params: GenerationParams, out: Path, ckpt: Path) -> None:
    outcome = runner_for(model).run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert outcome.resumed_from is not None and outcome.resumed_from.step == PAUSE_AT


def test_a_paused_cached_job_resumes_in_a_fresh_process_to_the_uninterrupted_image(
    model: ModelInfo, runner: Runner, tmp_path: Path, fresh_process: Callable[..., Any]
) -> None:
    params = cached_params(seed=7)
    out, ckpt = tmp_path / "paused.png", tmp_path / "paused.ckpt"
    paused = runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(ckpt, params).checkpoint
    cache = saved.step_cache["cond"]  # the residuals of step 1, the last full one
    assert set(saved.step_cache) == {"cond"} and cache["should_compute"] is False
    assert isinstance(cache["head_block_residual"], torch.Tensor)
    # Without its cache state the job would resume to another image: refused instead.
    emptied = tmp_path / "emptied.ckpt"
    save_checkpoint(emptied, replace(saved, step_cache={}))
    with pytest.raises(CheckpointMismatch, match="step cache"):
        runner.run(params, output_path=tmp_path / "e.png", checkpoint_path=emptied, on_step=go_on)
    fresh_process(_resume, model, params, out, ckpt)  # spawned, as a worker after a crash
    whole = generate(runner, params, tmp_path, "whole")
    assert not ckpt.exists()
    assert max_diff(pixels(out), whole) == 0


def test_speed_settings_are_checked_and_recorded() -> None:
    fast = GenerationParams(prompt="a", speed="fast").validated()
    assert fast.cache_threshold == 0.08 and GenerationParams(prompt="a").cache_threshold == 0
    assert replace(fast, speed="fastest").cache_threshold == 0.12
    assert "Speed: fast, First Block Cache threshold: 0.08" in a1111_parameters(fast)
    assert "Speed" not in a1111_parameters(GenerationParams(prompt="a"))
    for wrong, words in (
        ({"speed": "ludicrous"}, "unknown speed"),
        ({"speed": "fast", "speed_threshold": 2.0}, "between 0 and 1"),
        ({"speed_threshold": 0.1}, "needs speed fast or fastest"),
    ):
        with pytest.raises(InvalidParameters, match=words):
            GenerationParams(prompt="a", **wrong).validated()


def _klein() -> Any:
    from app.testing.tiny.klein import build_tiny_klein

    return build_tiny_klein()


def _sd3() -> Any:
    from app.testing.tiny.sd3 import build_tiny_sd3

    return build_tiny_sd3()


def _zimage() -> Any:
    from app.testing.tiny.zimage import build_tiny_zimage

    return build_tiny_zimage()


def _chroma() -> Any:
    from app.testing.tiny.chroma import build_tiny_chroma

    return build_tiny_chroma()


def _kontext() -> Any:
    from app.testing.tiny.kontext import build_tiny_kontext

    return build_tiny_kontext()


def _flux_fill() -> Any:
    from app.testing.tiny.flux_fill import build_tiny_flux_fill

    return build_tiny_flux_fill()


# Why the other transformer families declare no step cache: each stock pipeline fails with
# the hook as diffusers 0.42 ships it (loop/step_cache.py says where). When one of these no
# longer fails, its family may run the hook: turn its `step_cache` on with a stock test.
STOCK_FAILURES = {
    "chroma": (_chroma, ValueError, "ChromaTransformerBlock'> not registered"),
    "flux1-fill": (_flux_fill, ValueError, "No cache context is set"),
    "klein": (_klein, TypeError, "'Tensor' and 'list'"),
    "kontext": (_kontext, ValueError, "No cache context is set"),
    "sd3": (_sd3, ValueError, "No cache context is set"),
    "zimage": (_zimage, ValueError, "'hidden_states' not found"),
}
# A text to image call of each at 64 px: Kontext's scales its size to `max_area` else.
SIZE = {"height": 64, "width": 64}
CALLS: dict[str, dict[str, Any]] = {
    "kontext": {**SIZE, "max_area": 64 * 64},
    # Fill inpaints: a picture and a mask.
    "flux1-fill": {
        **SIZE,
        "image": Image.new("RGB", (64, 64)),
        "mask_image": Image.new("L", (64, 64), 255),
    },
}


@pytest.mark.parametrize("name", sorted(STOCK_FAILURES))
def test_the_families_without_step_caching_are_those_whose_stock_pipeline_fails_with_it(
    name: str,
) -> None:
    from diffusers.hooks import apply_first_block_cache

    build, error, words = STOCK_FAILURES[name]
    pipe = build()
    pipe.set_progress_bar_config(disable=True)
    with pytest.raises(error, match=words):  # Chroma's fails here, the others when called
        # What `enable_cache` applies (SD3's and Z-Image's transformers lack that method).
        apply_first_block_cache(pipe.transformer, FirstBlockCacheConfig(threshold=THRESHOLD))
        pipe(prompt="a", num_inference_steps=2, **CALLS.get(name, SIZE))
    cached = {s.checkpoint_family for s in families() if s.step_cache}
    # test_step_cache_qwen.py, _qwen_edit.py, _wan.py, _wan_image.py, _ltx.py
    qwen = {"qwen-image", "qwen-image-edit", "qwen-image-edit-plus"}
    ltx = {"ltx-video", "ltx-condition"}
    assert cached == {"flux", *ltx, *qwen, "wan2.1", "wan2.1-i2v", "wan2.2-ti2v"}
