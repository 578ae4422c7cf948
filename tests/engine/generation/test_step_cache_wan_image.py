"""Step caching (First Block Cache) on Wan image to video, with CFG and an input image: Easel's
cached clip of a tiny Wan 2.2 TI2V and a tiny Wan 2.1 I2V is stock
`WanImageToVideoPipeline`'s with `transformer.enable_cache(FirstBlockCacheConfig(threshold))`
(its calls in the "cond" and "uncond" cache contexts, as Easel's), frame for frame; TI2V
without an image equals stock `WanPipeline` with the hook; a cached clip paused at step 2
resumes in a fresh runner to the uninterrupted clip. Each tiny DiT gets two blocks (one to
measure, the rest to skip)."""

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

from app.engine.generation.loop import step_cache
from app.engine.generation.outcome import OutcomeKind
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.test_wan import Written, max_frame_diff, wan_params
from tests.engine.generation.test_wan_image import PNG, WITH_IMAGE, clip_of
from tests.engine.generation.tiny_architectures import model_info, pause_at, runner_for

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT, THRESHOLD = 4, 2, 0.2
# Each case: the folder, and whether the clip starts from the input image.
CASES = {"ti2v with an image": ("ti2v", True), "ti2v, text alone": ("ti2v", False),
         "i2v": ("i2v", True)}  # fmt: skip


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from app.testing.tiny.wan import write_tiny_wan_i2v, write_tiny_wan_ti2v

    root = tmp_path_factory.mktemp("cached-wan-image")
    return {
        "ti2v": write_tiny_wan_ti2v(root / "ti2v", layers=2),
        "i2v": write_tiny_wan_i2v(root / "i2v", layers=2),
    }


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


def cached_params(with_image: bool) -> GenerationParams:
    image = WITH_IMAGE if with_image else {}
    return wan_params(
        steps=STEPS, frames=5, negative_prompt="blurry", speed="fast",
        speed_threshold=THRESHOLD, **image,
    )  # fmt: skip


def stock(folder: Path, params: GenerationParams) -> tuple[list[np.ndarray], list[bool]]:
    """The stock pipeline's frames with First Block Cache as its documentation applies it
    (with an image `WanImageToVideoPipeline`, else `WanPipeline`), and whether each
    step ran every block, in each context."""
    from diffusers import WanImageToVideoPipeline, WanPipeline

    image = Image.open(io.BytesIO(PNG)).convert("RGB") if params.init_image else None
    pipeline = WanImageToVideoPipeline if image is not None else WanPipeline
    pipe: Any = pipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=params.cache_threshold))
    computed: list[bool] = []

    def record(_pipe: Any, _i: int, _t: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        computed.extend(state["should_compute"] for state in step_cache.saved(pipe).values())
        return kwargs

    frames = pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt, height=params.height,
        width=params.width, num_frames=params.frames, num_inference_steps=params.steps,
        guidance_scale=params.cfg, generator=torch.Generator().manual_seed(params.seed),
        output_type="pil", callback_on_step_end=record, **({"image": image} if image else {}),
    ).frames[0]  # fmt: skip
    return [np.asarray(frame, dtype=np.int16) for frame in frames], computed


@pytest.mark.parametrize("case", CASES)
def test_a_cached_wan_image_clip_equals_stock_with_the_hook_and_resumes_exactly(
    case: str, folders: dict[str, Path], written: Written, tmp_path: Path
) -> None:
    name, with_image = CASES[case]
    folder = folders[name]
    model = model_info(folder, "wan")
    params = cached_params(with_image)
    runner = runner_for(model)
    whole = clip_of(runner, params, tmp_path, "whole")
    assert whole.kind is OutcomeKind.COMPLETED and whole.image_path is not None
    ours = written.frames[whole.image_path]
    theirs, computed = stock(folder, params)
    assert not all(computed), case  # the hook skipped blocks at some step
    assert max_frame_diff(ours, theirs) == 0, case
    uncached = clip_of(runner, replace(params, speed="off", speed_threshold=0.0), tmp_path, "off")
    assert uncached.image_path is not None  # so caching changed the clip: it ran in our loop
    assert max_frame_diff(ours, written.frames[uncached.image_path]) > 0, case
    paused = clip_of(runner, params, tmp_path, "paused", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip_of(runner_for(model), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    assert resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], ours) == 0, case
