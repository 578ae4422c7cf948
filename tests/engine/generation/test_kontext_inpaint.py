"""Flux.1 Kontext inpaint (the instruction limited to a mask) through Easel's own loop, on a
tiny random Kontext folder: stock `FluxKontextInpaintPipeline`'s image called with its
defaults (strength 1, guidance 3.5, the picture at the preferred resolution nearest its
shape: the job's size), in float32 and bfloat16; a paused inpaint resumes in a fresh runner
to the same image; a size that is not Kontext's, or "only masked", is refused at submit.

As in test_kontext.py, the table of preferred resolutions is shrunk eightfold for the stock
pipeline and Easel alike (both read diffusers' table), so that a step costs milliseconds."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import FluxKontextInpaintPipeline
from diffusers.pipelines.flux import pipeline_flux_kontext, pipeline_flux_kontext_inpaint
from PIL import Image

from app.engine.generation.device import DeviceChoice
from app.engine.generation.families.kontext import PREFERRED_RESOLUTIONS
from app.engine.generation.families.kontext.model import INPUT_LATENTS
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.loop import inpaint
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.kontext import write_tiny_kontext
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.test_inpaint import MASK_DIGEST, mask_png
from tests.engine.generation.tiny_architectures import (
    max_diff,
    model_info,
    pause_at,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT = 3, 1
REAL_TABLE = list(pipeline_flux_kontext_inpaint.PREFERRED_KONTEXT_RESOLUTIONS)
SMALL_TABLE = [(w // 8, h // 8) for w, h in REAL_TABLE]
SIZE = (144, 96)  # 1248x832 / 8, rounded down to 16 as the stock pipeline rounds it
PICTURE, MASK = init_png(SIZE), mask_png(SIZE, (40, 20, 100, 70))


@pytest.fixture(autouse=True)
def small_preferred_resolutions(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (pipeline_flux_kontext, pipeline_flux_kontext_inpaint):
        monkeypatch.setattr(module, "PREFERRED_KONTEXT_RESOLUTIONS", SMALL_TABLE)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_kontext(tmp_path_factory.mktemp("kontext-inpaint") / "kontext")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder)


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


def inpaint_params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "a red hat", "model": "m", "steps": STEPS, "cfg": 3.5, "width": SIZE[0],
        "height": SIZE[1], "seed": 1234, "init_image": "job:1", "mask": MASK_DIGEST,
        "mask_blur": 0, "strength": 1.0,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def stock(folder: Path, params: GenerationParams, dtype: torch.dtype = torch.float32) -> Any:
    """The stock pipeline as its documentation calls it: picture, mask, instruction."""
    pipe: Any = FluxKontextInpaintPipeline.from_pretrained(
        folder, dtype=dtype, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe(
        prompt=params.prompt, image=Image.open(io.BytesIO(PICTURE)),
        mask_image=Image.open(io.BytesIO(MASK)), strength=params.strength,
        num_inference_steps=params.steps, generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]  # fmt: skip


def ours(runner: Runner, params: GenerationParams, folder: Path, name: str, **kwargs: Any) -> Any:
    kwargs.setdefault("on_step", lambda _p: StepDecision.CONTINUE)
    return runner.run(
        params, RunInputs(init_image=PICTURE, mask=MASK), output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt", **kwargs,
    )  # fmt: skip


def image_of(outcome: Any) -> np.ndarray:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


def test_a_kontext_inpaint_is_the_stock_kontext_inpaint_pipelines_image(
    folder: Path, runner: Runner, tmp_path: Path
) -> None:
    params = inpaint_params()
    image = image_of(ours(runner, params, tmp_path, "ours"))
    assert image.shape == (SIZE[1], SIZE[0], 3)
    assert max_diff(image, pixels(stock(folder, params))) == 0


def test_a_paused_kontext_inpaint_resumes_in_a_fresh_runner_to_the_same_image(
    folder: Path, model: ModelInfo, runner: Runner, tmp_path: Path
) -> None:
    params = inpaint_params(seed=7, strength=0.8)  # trimmed as the stock pipeline trims it
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    assert max_diff(whole, pixels(stock(folder, params))) == 0
    paused = ours(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(tmp_path / "job.ckpt").checkpoint
    assert {INPUT_LATENTS, inpaint.MASK, inpaint.NOISE} <= set(saved.conditioning)
    resumed = ours(runner_for(model), params, tmp_path, "job")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    assert max_diff(image_of(resumed), whole) == 0


def test_in_bfloat16_a_kontext_inpaint_equals_the_stock_pipeline_and_resumes_exactly(
    folder: Path, model: ModelInfo, tmp_path: Path
) -> None:
    bf16 = DeviceChoice("cpu", "bfloat16")
    params = inpaint_params()
    runner = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    assert max_diff(whole, pixels(stock(folder, params, torch.bfloat16))) == 0
    paused = ours(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    fresh = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    assert max_diff(image_of(ours(fresh, params, tmp_path, "job")), whole) == 0


def test_the_table_submit_checks_is_diffusers_own() -> None:
    assert list(PREFERRED_RESOLUTIONS) == REAL_TABLE


def test_a_size_kontext_does_not_inpaint_at_or_only_masked_is_refused_at_submit(
    folder: Path,
) -> None:
    search = ModelSearchPath(user=(folder.parent,))
    name = folder.name
    check_runnable(inpaint_params(model=name, width=1248, height=832), search)
    check_runnable(inpaint_params(model=name, width=1568, height=672), search)  # over 1 MP
    refusals = {
        "Flux.1 Kontext inpaints at its preferred size nearest the picture's shape, "
        "1248x832 here, not 1200x800": {"width": 1200, "height": 800},
        'Flux.1 Kontext inpaints the whole picture; turn "only masked" off': {
            "width": 1024, "height": 1024, "only_masked": True,
        },
    }  # fmt: skip
    for sentence, changes in refusals.items():
        with pytest.raises(InvalidParameters, match=re.escape(sentence)):
            check_runnable(inpaint_params(model=name, **changes), search)
