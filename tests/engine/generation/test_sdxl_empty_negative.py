"""SDXL with an empty negative prompt follows the model's `force_zeros_for_empty_prompt`.

The stock StableDiffusionXLPipeline, called with its defaults (no negative prompt at all),
conditions the unconditional half on zeros when the model's config says so, and on the
encoded empty string when it does not; Stability's reference sampling does the same.
Our loop must give the very same image either way, on the plain and the A1111 path.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from app.engine.generation.families import family_of
from app.engine.generation.families.sdxl.model import POOLED_EMBEDS
from app.engine.generation.families.unet import PROMPT_EMBEDS
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from app.testing.images import pixels
from tests.engine.generation.tiny_architectures import (
    generate,
    max_diff,
    model_info,
    params_for,
    runner_for,
    tiny_folders,
)

__all__ = ["tiny_folders"]

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module", params=[True, False], ids=["force-zeros", "encode-empty"])
def sdxl_runner(
    request: pytest.FixtureRequest,
    tiny_folders: dict[Architecture, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Runner:
    """The tiny SDXL with `force_zeros_for_empty_prompt` as the parameter says."""
    folder = tmp_path_factory.mktemp("sdxl-zeros") / "sdxl"
    shutil.copytree(tiny_folders[Architecture.SDXL], folder)
    index = json.loads((folder / "model_index.json").read_text())
    index["force_zeros_for_empty_prompt"] = request.param
    (folder / "model_index.json").write_text(json.dumps(index))
    runner = runner_for(model_info(folder, "m"))
    assert runner.load("m").pipe.config.force_zeros_for_empty_prompt is request.param
    return runner


def stock_with_its_defaults(pipe: object, params: GenerationParams) -> np.ndarray:
    """The stock pipeline as a diffusers user calls it: no `negative_prompt` argument."""
    from app.engine.generation import denoise

    original = pipe.scheduler  # type: ignore[attr-defined]
    pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)  # type: ignore[attr-defined]
    try:
        image = pipe(  # type: ignore[operator]
            params.prompt,
            num_inference_steps=params.steps,
            guidance_scale=params.cfg,
            width=params.width,
            height=params.height,
            generator=torch.Generator().manual_seed(params.seed),
        ).images[0]
    finally:
        pipe.scheduler = original  # type: ignore[attr-defined]
    return pixels(image)


@pytest.mark.parametrize("scheduler", ["Euler", "DPM++ 2M"])
def test_an_empty_negative_prompt_equals_the_stock_pipelines_default(
    sdxl_runner: Runner, tmp_path: Path, scheduler: str
) -> None:
    params = params_for("m", scheduler, negative_prompt="")
    ours = generate(sdxl_runner, params, tmp_path, "ours")
    stock = stock_with_its_defaults(sdxl_runner.load("m").pipe, params)
    assert max_diff(ours, stock) == 0


def test_the_a1111_path_treats_an_empty_negative_prompt_alike(sdxl_runner: Runner) -> None:
    """A weighted prompt goes through our own encoder: its unconditional half (and pooled
    embedding) must be what the stock encoder gives for an empty negative prompt."""
    pipe = sdxl_runner.load("m").pipe
    family = family_of(pipe)
    weighted = family.encode(params_for("m", prompt="the (cat:1.2)", negative_prompt=""), True)
    plain = family.encode(params_for("m", prompt="the cat", negative_prompt=""), True)
    for name in (PROMPT_EMBEDS, POOLED_EMBEDS):
        uncond_weighted, uncond_plain = weighted[name][:1], plain[name][:1]
        assert torch.equal(uncond_weighted, uncond_plain), name
        zeros = bool((uncond_plain == 0).all())
        assert zeros is pipe.config.force_zeros_for_empty_prompt, name
