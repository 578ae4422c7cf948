"""Step caching (First Block Cache) on the tiny LTX-Video, with CFG: Easel's cached clip is
stock `LTXPipeline`'s (and, from an image, `LTXImageToVideoPipeline`'s) with
`transformer.enable_cache(FirstBlockCacheConfig(threshold))`, frame for frame; the stock
loops run the negative and the prompt as one batch in the single cache context
"cond_uncond", as Easel's does; a cached job paused mid-run resumes in a fresh runner to
the uninterrupted clip, that context's state carried by the checkpoint.

The hook needs two blocks (one to measure, the rest to skip): the tiny DiT gets two. At
0.2 text to video's 4 steps run [full, skip, skip, full] (asserted below)."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers.hooks import FirstBlockCacheConfig
from PIL import Image

from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.loop import step_cache
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.test_ltx import PNG, WITH_IMAGE, Written, clip, ltx_params
from tests.engine.generation.test_ltx import max_frame_diff as diff
from tests.engine.generation.tiny_architectures import model_info, pause_at, runner_for

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT, THRESHOLD = 4, 2, 0.2
DECISIONS = [True, False, False, True]  # per step: all blocks ran, or cached


def cached_params(**changes: Any) -> GenerationParams:
    base = {"steps": STEPS, "negative_prompt": "blurry"}
    return ltx_params(**{**base, "speed": "fast", "speed_threshold": THRESHOLD, **changes})


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.ltx import write_tiny_ltx

    return write_tiny_ltx(tmp_path_factory.mktemp("cached-ltx") / "ltx", layers=2)


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder, "ltx")


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


def stock(
    folder: Path, params: GenerationParams, pipeline_name: str = ""
) -> tuple[list[Any], list[bool]]:
    """The stock pipeline's frames with First Block Cache as its documentation applies it
    (`LTXImageToVideoPipeline` given the picture when the job has an init image, or
    `pipeline_name`'s), and each step's decision (True: all blocks ran)."""
    import diffusers

    extra: dict[str, Any] = {}
    if params.init_image:
        extra["image"] = Image.open(io.BytesIO(PNG)).convert("RGB")
    name = pipeline_name or ("LTXImageToVideoPipeline" if extra else "LTXPipeline")
    pipe: Any = getattr(diffusers, name).from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=params.cache_threshold))
    decisions: list[bool] = []

    def record(_pipe: Any, _i: int, _t: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        decisions.append(step_cache.saved(pipe)["cond_uncond"]["should_compute"])
        return kwargs

    frames = pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt, height=params.height,
        width=params.width, num_frames=params.frames, frame_rate=params.fps,
        num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil",
        callback_on_step_end=record, **extra,
    ).frames[0]  # fmt: skip
    return [np.asarray(frame, dtype=np.int16) for frame in frames], decisions


def test_a_cached_ltx_job_draws_the_stock_pipelines_clip_with_the_same_hook(
    runner: Runner, folder: Path, written: Written, tmp_path: Path
) -> None:
    params = cached_params()
    cached = written.of(clip(runner, params, tmp_path, "cached"))
    theirs, decisions = stock(folder, params)
    assert decisions == DECISIONS  # steps were skipped
    assert diff(cached, theirs) == 0
    uncached = clip(runner, replace(params, speed="off", speed_threshold=0.0), tmp_path, "off")
    assert diff(cached, written.of(uncached)) > 0  # so the hook ran in Easel's loop too


def test_a_cached_ltx_job_from_an_image_draws_the_stock_i2v_pipelines_clip(
    runner: Runner, folder: Path, written: Written, tmp_path: Path
) -> None:
    params = cached_params(**WITH_IMAGE)
    cached = written.of(clip(runner, params, tmp_path, "cached-i2v"))
    theirs, decisions = stock(folder, params)
    assert not all(decisions)  # some step was skipped
    assert diff(cached, theirs) == 0


def test_a_paused_cached_ltx_job_resumes_in_a_fresh_runner_to_the_uninterrupted_clip(
    model: ModelInfo, runner: Runner, written: Written, tmp_path: Path
) -> None:
    params = cached_params(seed=7)
    paused = clip(runner, params, tmp_path, "paused", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    cache = load_checkpoint(tmp_path / "paused.ckpt", params).checkpoint.step_cache
    # The residuals of step 1, the last full one, before a step that skips.
    assert set(cache) == {"cond_uncond"} and not cache["cond_uncond"]["should_compute"]
    resumed = clip(runner_for(model), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    whole = written.of(clip(runner, params, tmp_path, "whole"))
    assert diff(written.of(resumed), whole) == 0


def test_a_cached_0_9_5_job_from_an_image_draws_the_stock_condition_pipelines_clip(
    tmp_path: Path, written: Written
) -> None:
    """LTX-Video 0.9.5+ (`LTXConditionPipeline`, the same "cond_uncond" context)."""
    from app.testing.tiny.ltx import write_tiny_ltx_condition

    folder = write_tiny_ltx_condition(tmp_path / "ltx", layers=2)
    params = cached_params(**WITH_IMAGE)
    cached = written.of(clip(runner_for(model_info(folder, "ltx")), params, tmp_path, "c"))
    theirs, decisions = stock(folder, params, "LTXConditionPipeline")
    assert not all(decisions)  # some step was skipped
    assert diff(cached, theirs) == 0
