"""Flux.1 Kontext through Easel's own loop, on a tiny random folder: an edit (the
instruction and the picture it edits) is stock `FluxKontextPipeline`'s image, called with
its defaults (guidance 3.5, the input resized to the preferred resolution nearest its
aspect ratio); a paused edit resumes in a fresh runner to the same image; what Kontext
cannot take, and an edit on a model that cannot edit, is refused at submit in one sentence.

The stock pipeline reads its input at about 1 megapixel whatever the output's size, which
costs a tiny model seconds per step on a CPU: here its table of preferred resolutions is
shrunk eightfold, for the stock pipeline and Easel alike (they read the same table), so
the choice of the nearest aspect ratio is what runs; benchmarks/architectures.py's
`flux1-kontext` row runs the real table at 1024x1024."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import FluxKontextPipeline
from diffusers.pipelines.flux import pipeline_flux_kontext
from PIL import Image

from app.engine.generation.device import DeviceChoice
from app.engine.generation.families import family_of
from app.engine.generation.families.kontext.model import INPUT_LATENTS, KontextFamily
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import KIND_EDIT, GenerationParams, InvalidParameters
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.kontext import write_tiny_kontext
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.tiny_architectures import (
    max_diff,
    model_info,
    pause_at,
    pixels,
    runner_for,
    tiny_folders,
)

__all__ = ["tiny_folders"]  # the fixture (the SD 1.x model an edit is refused on), for pytest

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT = 3, 1
PICTURE = (64, 48)  # the picture edited: 4:3, nearest the table's (1184, 880) / 8
SMALL_TABLE = [(w // 8, h // 8) for w, h in pipeline_flux_kontext.PREFERRED_KONTEXT_RESOLUTIONS]


@pytest.fixture(autouse=True)
def small_preferred_resolutions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline_flux_kontext, "PREFERRED_KONTEXT_RESOLUTIONS", SMALL_TABLE)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_kontext(tmp_path_factory.mktemp("kontext") / "kontext")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder)


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


def edit_params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "make it night", "model": "m", "steps": STEPS, "cfg": 3.5, "width": 64,
        "height": 48, "seed": 1234, "kind": KIND_EDIT, "init_image": "job:1",
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def stock(folder: Path, params: GenerationParams, dtype: torch.dtype = torch.float32) -> Any:
    """The stock pipeline's edit as its documentation shows: the picture, the instruction,
    the generator; the job's steps, and its size as `height`, `width` and `max_area`
    (their product: the size kept, as at 1024x1024 with none given)."""
    pipe: Any = FluxKontextPipeline.from_pretrained(folder, dtype=dtype, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe(
        image=Image.open(io.BytesIO(init_png(PICTURE))),
        prompt=params.prompt, num_inference_steps=params.steps, height=params.height,
        width=params.width, max_area=params.width * params.height,
        generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]  # fmt: skip


def ours(runner: Runner, params: GenerationParams, folder: Path, name: str, **kwargs: Any) -> Any:
    kwargs.setdefault("on_step", lambda _p: StepDecision.CONTINUE)
    return runner.run(
        params, RunInputs(init_image=init_png(PICTURE)), output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt", **kwargs,
    )  # fmt: skip


def image_of(outcome: Any) -> np.ndarray:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


def test_a_kontext_folder_is_detected_as_flux1_kontext(model: ModelInfo) -> None:
    assert model.architecture is Architecture.FLUX1_KONTEXT and model.native_size == 1024


@pytest.mark.parametrize("size", [(64, 48), (48, 64)])
def test_an_edit_is_the_stock_kontext_pipelines_image(
    folder: Path, runner: Runner, tmp_path: Path, size: tuple[int, int]
) -> None:
    params = edit_params(width=size[0], height=size[1])
    outcome = ours(runner, params, tmp_path, "ours")
    image = image_of(outcome)
    assert image.shape == (size[1], size[0], 3)
    recorded = Image.open(outcome.image_path).info["parameters"]  # the instruction and input
    assert recorded.startswith("make it night\n") and "Edit image: job:1" in recorded
    assert "Denoising strength" not in recorded
    assert max_diff(image, pixels(stock(folder, params))) == 0
    if size == PICTURE:  # the instruction is read: another one edits otherwise
        other = image_of(ours(runner, edit_params(prompt="make it snow"), tmp_path, "other"))
        assert max_diff(image, other) > 0


def test_without_an_input_image_kontext_draws_the_stock_pipelines_text_to_image(
    folder: Path, runner: Runner, tmp_path: Path
) -> None:
    """A Kontext model given no image is Flux.1 text to image, as its pipeline given none."""
    params = edit_params(kind="generate", init_image="", prompt="a red circle")
    outcome = runner.run(
        params, output_path=tmp_path / "t2i.png", checkpoint_path=tmp_path / "t2i.ckpt",
        on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    pipe: Any = FluxKontextPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    reference = pipe(
        prompt=params.prompt, num_inference_steps=params.steps, height=48, width=64,
        max_area=64 * 48, generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]  # fmt: skip
    assert max_diff(image_of(outcome), pixels(reference)) == 0


def test_a_paused_edit_resumes_in_a_fresh_runner_to_the_same_image(
    model: ModelInfo, runner: Runner, tmp_path: Path
) -> None:
    params = edit_params(seed=7)
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    paused = ours(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(tmp_path / "job.ckpt").checkpoint
    assert saved.family == "flux1-kontext" and INPUT_LATENTS in saved.conditioning
    family = family_of(runner.load("m").pipe)
    assert isinstance(family, KontextFamily)
    resumed = ours(runner_for(model), params, tmp_path, "job")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    assert max_diff(image_of(resumed), whole) == 0


def test_what_kontext_cannot_take_is_refused_at_submit_in_one_sentence(
    folder: Path, tiny_folders: dict[Architecture, Path]
) -> None:
    search = ModelSearchPath(user=(folder.parent, tiny_folders[Architecture.SD1].parent))
    name = folder.name
    check_runnable(edit_params(model=name), search)
    refused: dict[str, tuple[dict[str, Any], str]] = {
        "too large": (
            {"width": 1024, "height": 1040},
            "Flux.1 Kontext draws at most 1048576 pixels (1024x1024 or the same area), "
            "not 1024x1040",
        ),
        "img2img": (
            {"kind": "generate"},
            "Flux.1 Kontext edits an image from an instruction rather than running img2img",
        ),
        "negative": ({"negative_prompt": "day"}, "Flux.1 Kontext takes no negative prompt"),
    }
    for changes, message in refused.values():
        with pytest.raises(InvalidParameters, match=re.escape(message)):
            check_runnable(edit_params(model=name, **changes), search)
    sd1 = tiny_folders[Architecture.SD1].name
    with pytest.raises(InvalidParameters, match="cannot follow an instruction to edit an image"):
        check_runnable(edit_params(model=sd1, scheduler="Euler a"), search)
    with pytest.raises(InvalidParameters, match="an edit needs the image it edits"):
        edit_params(init_image="").validated()


def test_in_bfloat16_an_edit_equals_the_stock_pipeline_and_resumes_exactly(
    folder: Path, model: ModelInfo, tmp_path: Path
) -> None:
    """bfloat16 arithmetic as on an Ampere GPU, on the CPU (the text encoders, the
    transformer and the VAE in it, as the stock pipeline loaded with dtype=bfloat16): the
    input image's latents and ids are kept in it, and a paused edit resumes exactly."""
    bf16 = DeviceChoice("cpu", "bfloat16")
    params = edit_params()
    runner = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    assert runner.load("m").pipe.transformer.dtype == torch.bfloat16
    assert max_diff(whole, pixels(stock(folder, params, torch.bfloat16))) == 0
    paused = ours(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    fresh = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    assert max_diff(image_of(ours(fresh, params, tmp_path, "job")), whole) == 0
