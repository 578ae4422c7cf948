"""Step caching (First Block Cache) on the tiny Qwen-Image-Edit and Qwen-Image-Edit Plus,
with true CFG: Easel's cached edit is stock `QwenImageEditPipeline`'s (and
`QwenImageEditPlusPipeline`'s) with the same hook and threshold (the
prompt's call in the "cond" cache context, the negative prompt's in "uncond", as the stock
loop names them: `model.py`'s calls, which the edit family inherits), and a cached edit
paused mid-run resumes in a fresh runner to the uninterrupted image, both contexts' state
carried by the checkpoint. The input area is shrunk as in test_qwen_edit.py.

The tiny model's blocks (two) change a lot from step to step: at 0.8 (the threshold
override) 4 steps run [full, skip, skip, full] in both contexts (asserted below)."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import QwenImageEditPipeline, QwenImageEditPlusPipeline
from diffusers.hooks import FirstBlockCacheConfig
from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit, pipeline_qwenimage_edit_plus
from PIL import Image

from app.engine.generation.families.qwen.processor import image_only_processor
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.loop import step_cache
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from app.testing.tiny.qwen import write_tiny_qwen_edit
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.test_qwen_edit import (
    PICTURE,
    edit_params,
    image_of,
    ours,
    small_dimensions,
    small_plus_dimensions,
)
from tests.engine.generation.tiny_architectures import (
    max_diff,
    model_info,
    pause_at,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT, THRESHOLD = 4, 2, 0.8
DECISIONS = [True, False, False, True]  # per step, in each context: all blocks ran or cached
# Each edit family's stock pipeline; its tiny folder is written as that pipeline's.
PIPELINES: dict[str, Any] = {"edit": QwenImageEditPipeline, "plus": QwenImageEditPlusPipeline}
FAMILY = {"edit": "qwen-image-edit", "plus": "qwen-image-edit-plus"}  # what Easel runs


@pytest.fixture(autouse=True)
def small_input_area(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline_qwenimage_edit, "calculate_dimensions", small_dimensions)
    monkeypatch.setattr(pipeline_qwenimage_edit_plus, "calculate_dimensions", small_plus_dimensions)


def cached_params(**changes: Any) -> GenerationParams:
    base = {"steps": STEPS, "negative_prompt": "blurry", "seed": 1}
    return edit_params(**{**base, "speed": "fast", "speed_threshold": THRESHOLD, **changes})


@pytest.fixture(scope="module", params=sorted(PIPELINES))
def folder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    name = request.param
    return write_tiny_qwen_edit(
        tmp_path_factory.mktemp(f"cached-{name}") / name, plus=name == "plus"
    )


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder)


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


def stock(folder: Path, params: GenerationParams) -> tuple[np.ndarray, list[dict[str, bool]]]:
    """The stock pipeline's edit (as test_qwen_edit.py calls it) with First Block Cache as
    its documentation applies it, and each step's decision per cache context (True: all
    blocks ran)."""
    processor = image_only_processor(folder / "processor")
    pipeline_class = PIPELINES[folder.name]
    pipe: Any = pipeline_class.from_pretrained(folder, processor=processor, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=params.cache_threshold))
    decisions: list[dict[str, bool]] = []

    def record(_pipe: Any, _i: int, _t: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        saved = step_cache.saved(pipe)
        decisions.append({name: state["should_compute"] for name, state in saved.items()})
        return kwargs

    image = pipe(
        image=Image.open(io.BytesIO(init_png(PICTURE))),
        prompt=params.prompt, negative_prompt=params.negative_prompt,
        true_cfg_scale=params.cfg, num_inference_steps=params.steps, height=params.height,
        width=params.width, generator=torch.Generator("cpu").manual_seed(params.seed),
        callback_on_step_end=record,
    ).images[0]  # fmt: skip
    return pixels(image), decisions


def test_a_cached_edit_is_the_stock_pipelines_image_with_the_same_hook(
    runner: Runner, folder: Path, tmp_path: Path
) -> None:
    params = cached_params()
    cached = image_of(ours(runner, params, tmp_path, "cached"))
    theirs, decisions = stock(folder, params)
    assert decisions == [{"cond": full, "uncond": full} for full in DECISIONS]  # steps skipped
    assert max_diff(cached, theirs) == 0
    off = replace(params, speed="off", speed_threshold=0.0)
    uncached = image_of(ours(runner, off, tmp_path, "off"))
    assert max_diff(cached, uncached) > 0  # so caching changed the image: the hook ran


def test_a_paused_cached_edit_resumes_in_a_fresh_runner_to_the_uninterrupted_image(
    folder: Path, model: ModelInfo, runner: Runner, tmp_path: Path
) -> None:
    params = cached_params(seed=7)
    paused = ours(runner, params, tmp_path, "paused", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(tmp_path / "paused.ckpt", params).checkpoint
    assert saved.family == FAMILY[folder.name]
    cache = saved.step_cache
    # Both branches' residuals of step 1, the last full one, before a step that skips.
    assert set(cache) == {"cond", "uncond"}
    assert not cache["cond"]["should_compute"] and not cache["uncond"]["should_compute"]
    resumed = ours(runner_for(model), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    assert max_diff(image_of(resumed), whole) == 0
