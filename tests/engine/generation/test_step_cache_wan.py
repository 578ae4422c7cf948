"""Step caching (First Block Cache) on the tiny Wan 2.1, with CFG: Easel's cached clip is
stock `WanPipeline`'s with `transformer.enable_cache(FirstBlockCacheConfig(threshold))`
(the prompt's call in the "cond" cache context, the negative prompt's in "uncond", as the
stock loop names them), frame for frame; a cached job paused mid-run resumes in a fresh
runner to the uninterrupted clip, both contexts' state carried by the checkpoint.

The hook needs two blocks (one to measure, the rest to skip): the tiny DiT gets two. At
0.2 its 4 steps run [full, skip, skip, full] in both contexts (asserted below)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from diffusers.hooks import FirstBlockCacheConfig

from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.loop import step_cache
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.test_wan import Written, clip, max_frame_diff, wan_params
from tests.engine.generation.tiny_architectures import model_info, pause_at, runner_for

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT, THRESHOLD = 4, 2, 0.2
DECISIONS = [True, False, False, True]  # per step, in each context: all blocks ran or cached


def cached_params(**changes: Any) -> GenerationParams:
    base = {"steps": STEPS, "negative_prompt": "blurry", "frames": 5}
    return wan_params(**{**base, "speed": "fast", "speed_threshold": THRESHOLD, **changes})


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan

    return write_tiny_wan(tmp_path_factory.mktemp("cached-wan") / "wan", layers=2)


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder, "wan")


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


def stock(folder: Path, params: GenerationParams) -> tuple[list[Any], list[dict[str, bool]]]:
    """Stock `WanPipeline`'s frames with First Block Cache as its documentation applies it,
    and each step's decision per cache context (True: all blocks ran)."""
    import numpy as np
    from diffusers import WanPipeline

    pipe: Any = WanPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=params.cache_threshold))
    decisions: list[dict[str, bool]] = []

    def record(_pipe: Any, _i: int, _t: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        saved = step_cache.saved(pipe)
        decisions.append({name: state["should_compute"] for name, state in saved.items()})
        return kwargs

    frames = pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt, height=params.height,
        width=params.width, num_frames=params.frames, num_inference_steps=params.steps,
        guidance_scale=params.cfg, generator=torch.Generator().manual_seed(params.seed),
        output_type="pil", callback_on_step_end=record,
    ).frames[0]  # fmt: skip
    return [np.asarray(frame, dtype=np.int16) for frame in frames], decisions


def test_a_cached_wan_job_draws_the_stock_pipelines_clip_with_the_same_hook(
    runner: Runner, folder: Path, written: Written, tmp_path: Path
) -> None:
    params = cached_params()
    done = clip(runner, params, tmp_path, "cached")
    assert done.kind is OutcomeKind.COMPLETED and done.image_path is not None
    theirs, decisions = stock(folder, params)
    assert decisions == [{"cond": full, "uncond": full} for full in DECISIONS]  # steps skipped
    assert max_frame_diff(written.frames[done.image_path], theirs) == 0
    uncached = clip(runner, replace(params, speed="off", speed_threshold=0.0), tmp_path, "off")
    assert uncached.image_path is not None
    # So caching changed the clip: the hook ran in Easel's loop too.
    assert max_frame_diff(written.frames[done.image_path], written.frames[uncached.image_path])


def test_a_paused_cached_wan_job_resumes_in_a_fresh_runner_to_the_uninterrupted_clip(
    model: ModelInfo, runner: Runner, written: Written, tmp_path: Path
) -> None:
    params = cached_params(seed=7)
    paused = clip(runner, params, tmp_path, "paused", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    cache = load_checkpoint(tmp_path / "paused.ckpt", params).checkpoint.step_cache
    # Both branches' residuals of step 1, the last full one, before a step that skips.
    assert set(cache) == {"cond", "uncond"}
    assert not cache["cond"]["should_compute"] and not cache["uncond"]["should_compute"]
    resumed = clip(runner_for(model), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    assert clip(runner, params, tmp_path, "whole").kind is OutcomeKind.COMPLETED
    assert max_frame_diff(
        written.frames[tmp_path / "paused.mp4"], written.frames[tmp_path / "whole.mp4"]
    ) == 0  # fmt: skip
