"""Qwen-Image-Edit through Easel's own loop, on a tiny random folder: an edit (the
instruction and the picture it edits) is stock `QwenImageEditPipeline`'s image, called with
its defaults but the job's steps, size and `cfg` (`true_cfg_scale`, with the job's negative
prompt); a paused edit resumes in a fresh runner to the same image; a job that is not an
edit is refused at submit in one sentence.

The stock pipeline is loaded as its users load it on a machine without torchvision (this
one): `from_pretrained` handed the processor built of the folder's `processor/` part, its
image processor on PIL (`Qwen2VLImageProcessorPil`) and its tokenizer, in a
`Qwen2VLProcessor` without the video processor transformers cannot build here
(families/qwen/processor.py).

The stock pipeline reads its input at about 1 megapixel whatever the output's size, which
costs a tiny model seconds per step on a CPU: here `calculate_dimensions`' area is shrunk
256-fold (16-fold per side), for the stock pipeline and Easel alike (they read the same
function); benchmarks/architectures.py's `qwen-image-edit` row runs it at 1 megapixel."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import QwenImageEditPipeline, QwenImageEditPlusPipeline
from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit, pipeline_qwenimage_edit_plus
from PIL import Image

from app.engine.generation.device import DeviceChoice
from app.engine.generation.families import family_of
from app.engine.generation.families.qwen.edit import (
    INPUT_LATENTS,
    QwenImageEditFamily,
    QwenImageEditPlusFamily,
)
from app.engine.generation.families.qwen.processor import image_only_processor
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import KIND_EDIT, GenerationParams, InvalidParameters
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.qwen import write_tiny_qwen_edit
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.tiny_architectures import (
    max_diff,
    model_info,
    pause_at,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT = 3, 1
PICTURE = (64, 48)  # the picture edited: 4:3
STOCK_DIMENSIONS = pipeline_qwenimage_edit.calculate_dimensions
PLUS_DIMENSIONS = pipeline_qwenimage_edit_plus.calculate_dimensions


def small_dimensions(target_area: int, ratio: float) -> Any:
    return STOCK_DIMENSIONS(target_area // 256, ratio)


def small_plus_dimensions(target_area: int, ratio: float) -> Any:
    return PLUS_DIMENSIONS(target_area // 256, ratio)


@pytest.fixture(autouse=True)
def small_input_area(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline_qwenimage_edit, "calculate_dimensions", small_dimensions)
    monkeypatch.setattr(pipeline_qwenimage_edit_plus, "calculate_dimensions", small_plus_dimensions)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen_edit(tmp_path_factory.mktemp("qwen-edit") / "qwen-edit")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder)


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


def edit_params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "make it night", "model": "m", "steps": STEPS, "cfg": 4.0, "width": 64,
        "height": 48, "seed": 1234, "kind": KIND_EDIT, "init_image": "job:1",
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def stock(
    folder: Path,
    params: GenerationParams,
    dtype: torch.dtype = torch.float32,
    pipeline_class: Any = QwenImageEditPipeline,
) -> Any:
    """The stock pipeline's edit as its documentation shows (the picture, the instruction,
    the negative prompt, `true_cfg_scale`, the generator), with the job's steps and size."""
    processor = image_only_processor(folder / "processor")
    pipe: Any = pipeline_class.from_pretrained(
        folder, processor=processor, dtype=dtype, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe(
        image=Image.open(io.BytesIO(init_png(PICTURE))),
        prompt=params.prompt, negative_prompt=params.negative_prompt,
        true_cfg_scale=params.cfg, num_inference_steps=params.steps, height=params.height,
        width=params.width, generator=torch.Generator("cpu").manual_seed(params.seed),
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


def test_a_qwen_image_edit_folder_is_detected_as_qwen_image_edit(model: ModelInfo) -> None:
    assert model.architecture is Architecture.QWEN_IMAGE_EDIT and model.native_size == 1024


@pytest.mark.parametrize("cfg", [4.0, 1.0])
def test_an_edit_is_the_stock_qwen_image_edit_pipelines_image(
    folder: Path, runner: Runner, tmp_path: Path, cfg: float
) -> None:
    """True CFG (two passes, the negative prompt read with the image) and without it (the
    stock default without a negative prompt is this: one pass)."""
    params = edit_params(cfg=cfg, negative_prompt="blurry" if cfg > 1 else "")
    outcome = ours(runner, params, tmp_path, "ours")
    image = image_of(outcome)
    assert image.shape == (48, 64, 3)
    recorded = Image.open(outcome.image_path).info["parameters"]
    assert recorded.startswith("make it night\n") and "Edit image: job:1" in recorded
    assert max_diff(image, pixels(stock(folder, params))) == 0
    if cfg > 1:  # the instruction is read: another one edits otherwise
        other = image_of(ours(runner, edit_params(prompt="make it snow"), tmp_path, "other"))
        assert max_diff(image, other) > 0


def test_a_paused_edit_resumes_in_a_fresh_runner_to_the_same_image(
    model: ModelInfo, runner: Runner, tmp_path: Path
) -> None:
    params = edit_params(seed=7)
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    paused = ours(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(tmp_path / "job.ckpt").checkpoint
    assert saved.family == "qwen-image-edit" and INPUT_LATENTS in saved.conditioning
    assert isinstance(family_of(runner.load("m").pipe), QwenImageEditFamily)
    resumed = ours(runner_for(model), params, tmp_path, "job")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    assert max_diff(image_of(resumed), whole) == 0


def test_a_job_that_is_not_an_edit_is_refused_at_submit_in_one_sentence(folder: Path) -> None:
    search = ModelSearchPath(user=(folder.parent,))
    name = folder.name
    check_runnable(edit_params(model=name), search)
    message = "Qwen-Image-Edit edits a picture from an instruction and draws nothing without one"
    for changes in ({"kind": "generate", "init_image": ""}, {"kind": "generate"}):
        with pytest.raises(InvalidParameters, match=re.escape(message)):
            check_runnable(edit_params(model=name, **changes), search)


def test_in_bfloat16_an_edit_equals_the_stock_pipeline_and_resumes_exactly(
    folder: Path, model: ModelInfo, tmp_path: Path
) -> None:
    """bfloat16 arithmetic as on an Ampere GPU, on the CPU (every part in it, as the stock
    pipeline loaded with dtype=bfloat16); the input image's latents and the prompts are
    kept in it, and a paused edit resumes exactly."""
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


def test_an_edit_plus_is_the_stock_pipelines_image_and_resumes_exactly(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Qwen-Image-Edit Plus (2509): the picture read at two sizes, "Picture 1" in the
    template; one input image, true CFG."""
    folder = write_tiny_qwen_edit(tmp_path_factory.mktemp("plus") / "plus", plus=True)
    plus = model_info(folder)
    assert plus.architecture is Architecture.QWEN_IMAGE_EDIT_PLUS
    runner = runner_for(plus)
    params = edit_params(negative_prompt="blurry")
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    assert isinstance(family_of(runner.load("m").pipe), QwenImageEditPlusFamily)
    reference = stock(folder, params, pipeline_class=QwenImageEditPlusPipeline)
    assert max_diff(whole, pixels(reference)) == 0
    paused = ours(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    assert load_checkpoint(tmp_path / "job.ckpt").checkpoint.family == "qwen-image-edit-plus"
    assert max_diff(image_of(ours(runner_for(plus), params, tmp_path, "job")), whole) == 0
