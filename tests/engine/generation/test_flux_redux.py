"""Flux.1 Redux through Easel's own loop, on a tiny random Flux.1 dev and a tiny random
FLUX.1-Redux-dev-shaped folder: a reference image's job is stock `FluxPriorReduxPipeline`
(with the base pipeline's text encoders, the prompt-weighting call) feeding `FluxPipeline`,
in float32 and bfloat16; a pause resumes in a fresh runner to the same image (the image
tokens are in the checkpoint); a Flux.1 reference naming no Redux model, and a reference
on a family neither IP-Adapter nor Redux guides, are refused at submit in one sentence."""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.device import DeviceChoice
from app.engine.generation.families.flow_params import flow_problems
from app.engine.generation.families.flux.model import PROMPT_EMBEDS
from app.engine.generation.families.flux.redux import redux_modules
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.guidance.redux_models import (
    ReduxNotFound,
    find_redux_model,
    list_redux_models,
)
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import (
    GenerationParams,
    InvalidParameters,
    ReferenceImage,
    encode_reference,
)
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.flux import write_tiny_flux
from app.testing.tiny.redux import stock_redux_flux, write_tiny_redux
from tests.engine.generation.test_ip_adapter import reference_png, second_reference_png
from tests.engine.generation.tiny_architectures import max_diff, model_info, pause_at, pixels

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT = 3, 1
REDUX = "FLUX.1-Redux-dev"
PNG = reference_png()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder: the tiny Flux.1 dev at its top, the Redux folder in redux/."""
    root = tmp_path_factory.mktemp("redux-models")
    write_tiny_flux(root / "flux-dev", guidance_embeds=True)
    write_tiny_redux(root / "redux" / REDUX)
    return root


@pytest.fixture(scope="module")
def model(models: Path) -> ModelInfo:
    return model_info(models / "flux-dev", "m")


def runner_for(model: ModelInfo, models: Path, dtype: str = "float32") -> Runner:
    return Runner(
        device=DeviceChoice("cpu", dtype), resolve=lambda _name: model, threads=1,
        resolve_redux=lambda name: find_redux_model(name, [models / "redux"]),
    )  # fmt: skip


@pytest.fixture(scope="module")
def runner(model: ModelInfo, models: Path) -> Runner:
    return runner_for(model, models)


def redux_params(weight: float = 1.0, redux: str = REDUX, **changes: Any) -> GenerationParams:
    reference = ReferenceImage("upload:" + hashlib.sha256(PNG).hexdigest(), redux, weight)
    base: dict[str, Any] = {
        "prompt": "a cat in a hat", "model": "m", "steps": STEPS, "cfg": 2.5, "width": 32,
        "height": 48, "seed": 1234, "reference": encode_reference([reference]),
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def ours(runner: Runner, params: GenerationParams, folder: Path, name: str, **kw: Any) -> Any:
    return runner.run(
        params, RunInputs(reference_images=[PNG] if params.reference else []),
        output_path=folder / f"{name}.png", checkpoint_path=folder / f"{name}.ckpt",
        on_step=kw.get("on_step", lambda _p: StepDecision.CONTINUE),
    )  # fmt: skip


def image_of(outcome: Any) -> np.ndarray:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


def stock(
    models: Path, params: GenerationParams, dtype: torch.dtype, pngs: tuple[bytes, ...] = (PNG,)
) -> np.ndarray:
    pictures = [Image.open(io.BytesIO(png)) for png in pngs]
    flux, redux = models / "flux-dev", models / "redux" / REDUX
    return pixels(stock_redux_flux(flux, redux, params, pictures, dtype))


def test_redux_models_are_found_in_the_redux_folder(models: Path) -> None:
    assert [info.name for info in list_redux_models([models / "redux"])] == [REDUX]
    with pytest.raises(ReduxNotFound, match="need a Redux model"):
        find_redux_model("nope", [models / "redux"])


@pytest.mark.parametrize("weight", [1.0, 0.6])
def test_a_reference_is_stock_redux_feeding_flux(
    models: Path, runner: Runner, tmp_path: Path, weight: float
) -> None:
    params = redux_params(weight)
    image = image_of(ours(runner, params, tmp_path, "ours"))
    assert max_diff(image, stock(models, params, torch.float32)) == 0
    pipe = runner.load("m").pipe
    assert len(redux_modules(pipe)) == 2  # held (and counted in the memory budget)
    plain = image_of(ours(runner, redux_params(reference=""), tmp_path, "plain"))
    assert max_diff(image, plain) > 0  # the reference guides
    assert redux_modules(pipe) == []  # dropped by a job without references


def test_in_bfloat16_too_and_a_pause_resumes_exactly(
    model: ModelInfo, models: Path, tmp_path: Path
) -> None:
    params = redux_params(seed=7)
    whole = image_of(ours(runner_for(model, models, "bfloat16"), params, tmp_path, "whole"))
    assert max_diff(whole, stock(models, params, torch.bfloat16)) == 0
    paused = ours(
        runner_for(model, models, "bfloat16"), params, tmp_path, "job", on_step=pause_at(PAUSE_AT)
    )
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(tmp_path / "job.ckpt").checkpoint
    text_tokens = 512  # T5's, then the reference's 4
    assert saved.conditioning[PROMPT_EMBEDS].shape[1] == text_tokens + 4
    fresh = runner_for(model, models, "bfloat16")  # resumes without the reference image
    resumed = fresh.run(
        params, RunInputs(reference_images=[PNG]), output_path=tmp_path / "job.png",
        checkpoint_path=tmp_path / "job.ckpt", on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    assert max_diff(image_of(resumed), whole) == 0


def test_references_without_a_redux_model_are_refused_at_submit(models: Path) -> None:
    search = ModelSearchPath(user=(models,))
    check_runnable(redux_params(model="flux-dev"), search)
    sentence = "reference images on Flux.1 need a Redux model"
    with pytest.raises(ReduxNotFound, match=re.escape(sentence)):
        check_runnable(redux_params(model="flux-dev", redux="ip-adapter_sd15"), search)


def test_a_reference_on_a_family_no_adapter_guides_names_those_that_are() -> None:
    problems = flow_problems(Architecture.SD3, redux_params(model="sd3"))
    assert problems == [
        "reference images do not work with SD 3.5; they guide SD 1.x, SD 2.x, SDXL models "
        "through an IP-Adapter and Flux.1 models through a Redux model"
    ]


def test_references_naming_two_redux_models_are_refused_at_submit(models: Path) -> None:
    search = ModelSearchPath(user=(models,))
    one, other = (
        ReferenceImage("upload:" + hashlib.sha256(PNG).hexdigest(), name, 1.0)
        for name in (REDUX, "other")
    )
    params = redux_params(model="flux-dev", reference=encode_reference([one, other]))
    with pytest.raises(InvalidParameters, match="go through one Redux model"):
        check_runnable(params, search)


def test_two_references_are_the_priors_weighted_sum(runner: Runner, models: Path) -> None:
    """Several images: the prior's batch, each image's tokens after the prompt's, scaled by
    its weight and summed (diffusers' multi-image Redux)."""
    pngs = (PNG, second_reference_png())
    references = [
        ReferenceImage("upload:" + hashlib.sha256(png).hexdigest(), REDUX, weight)
        for png, weight in zip(pngs, (0.7, 0.4), strict=True)
    ]
    params = redux_params(reference=encode_reference(references), seed=4)
    outcome = runner.run(
        params, RunInputs(reference_images=pngs), output_path=models / "two.png",
        checkpoint_path=models / "two.ckpt", on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    assert max_diff(image_of(outcome), stock(models, params, torch.float32, pngs)) == 0
