"""Flux.1 Fill through Easel's own loop, on a tiny random FLUX.1-Fill-shaped folder: an
inpaint and an outpaint are stock `FluxFillPipeline`'s image, called with its defaults
(guidance 30, strength 1.0, its own mask processing), in float32 and bfloat16; a paused
inpaint resumes in a fresh runner to the same image; a job without a mask is refused at
submit in one sentence; a FluxPipeline folder over a Fill transformer is Fill's too."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import FluxFillPipeline
from PIL import Image

from app.engine.generation.device import DeviceChoice
from app.engine.generation.families import family_of
from app.engine.generation.families.flux import FILL_FILE_REFUSAL
from app.engine.generation.families.flux_fill.model import FILL_CONDITION, FluxFillFamily
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.files.transformer_files import detect_transformer_file
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.mask import Extension, Fill, outpaint
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.flux_fill import write_tiny_flux_fill
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
SIZE, MASK_BOX = (64, 48), (13, 5, 43, 38)  # not on 8-pixel lines: every pixel of a patch read
PICTURE, MASK = init_png(SIZE), mask_png(SIZE, MASK_BOX)
# An outpaint of a 32x32 picture by 16 pixels right and bottom: a 48x48 canvas.
SMALL = init_png((32, 32))
OUTPAINT = outpaint(SMALL, Extension(right=16, bottom=16), Fill.EDGE, seed=3)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_flux_fill(tmp_path_factory.mktemp("fill") / "fill")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder)


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


def fill_params(**changes: Any) -> GenerationParams:
    """An inpaint at the stock defaults: guidance 30, strength 1.0; the mask as drawn."""
    base: dict[str, Any] = {
        "prompt": "a red hat", "model": "m", "steps": STEPS, "cfg": 30.0, "width": SIZE[0],
        "height": SIZE[1], "seed": 1234, "init_image": "job:1", "mask": MASK_DIGEST,
        "mask_blur": 0, "strength": 1.0,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def stock(
    folder: Path, params: GenerationParams, inputs: RunInputs, dtype: torch.dtype = torch.float32
) -> np.ndarray:
    """`FluxFillPipeline` as its model card calls it (its guidance and strength defaults),
    the mask blurred first where the job blurs it, as diffusers' documentation shows."""
    pipe: Any = FluxFillPipeline.from_pretrained(folder, dtype=dtype, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    assert inputs.init_image is not None and inputs.mask is not None
    mask = Image.open(io.BytesIO(inputs.mask))
    if params.mask_blur:
        mask = pipe.mask_processor.blur(mask, params.mask_blur)
    image = pipe(
        prompt=params.prompt, image=Image.open(io.BytesIO(inputs.init_image)), mask_image=mask,
        height=params.height, width=params.width, num_inference_steps=params.steps,
        generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]  # fmt: skip
    return pixels(image)


def ours(runner: Runner, params: GenerationParams, folder: Path, name: str, **kwargs: Any) -> Any:
    kwargs.setdefault("on_step", lambda _p: StepDecision.CONTINUE)
    inputs = kwargs.pop("inputs", RunInputs(init_image=PICTURE, mask=MASK))
    return runner.run(
        params, inputs, output_path=folder / f"{name}.png", checkpoint_path=folder / f"{name}.ckpt",
        **kwargs,
    )  # fmt: skip


def image_of(outcome: Any) -> np.ndarray:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


def test_a_fill_folder_is_detected_as_flux1_fill(model: ModelInfo, tmp_path: Path) -> None:
    assert model.architecture is Architecture.FLUX1_FILL and model.native_size == 1024
    # A copy whose model index says FluxPipeline: Fill's by its transformer's input width.
    copy = shutil.copytree(model.path, tmp_path / "as-flux")
    index = json.loads((copy / "model_index.json").read_text())
    (copy / "model_index.json").write_text(json.dumps({**index, "_class_name": "FluxPipeline"}))
    as_flux = model_info(copy)
    assert as_flux.architecture is Architecture.FLUX1_FILL
    assert isinstance(runner_for(as_flux).load("m").pipe, FluxFillPipeline)


def test_an_inpaint_is_the_stock_fill_pipelines_image(
    folder: Path, runner: Runner, tmp_path: Path
) -> None:
    params = fill_params()
    image = image_of(ours(runner, params, tmp_path, "ours"))
    assert image.shape == (SIZE[1], SIZE[0], 3)
    assert max_diff(image, stock(folder, params, RunInputs(PICTURE, MASK))) == 0
    family = family_of(runner.load("m").pipe)
    assert isinstance(family, FluxFillFamily)
    # The guidance is the model's input: another one draws otherwise.
    other = image_of(ours(runner, fill_params(cfg=3.5), tmp_path, "other"))
    assert max_diff(image, other) > 0


def test_an_outpaint_is_the_stock_fill_pipelines_image(
    folder: Path, runner: Runner, tmp_path: Path
) -> None:
    """An outpaint job as `python -m app outpaint` makes it: the grown canvas, its mask over
    the new area (blurred by the job's default 4), strength 1."""
    params = fill_params(width=OUTPAINT.width, height=OUTPAINT.height, mask_blur=4, seed=5)
    inputs = RunInputs(OUTPAINT.image_png, OUTPAINT.mask_png)
    image = image_of(ours(runner, params, tmp_path, "out", inputs=inputs))
    assert image.shape == (48, 48, 3)
    assert max_diff(image, stock(folder, params, inputs)) == 0


def test_only_masked_is_the_stock_fill_image_of_the_masks_box_pasted_back(
    folder: Path, runner: Runner, tmp_path: Path
) -> None:
    """Only masked: the stock pipeline has no `padding_mask_crop`, so its user's way is
    the reference: the mask's box (plus padding, widened to the job's aspect ratio) cut
    from the picture and mask and scaled to the job's size as `FluxInpaintPipeline` cuts
    it, painted by `FluxFillPipeline`, pasted back through the mask."""
    params = fill_params(only_masked=True, mask_padding=8, width=32, height=32)
    image = image_of(ours(runner, params, tmp_path, "crop"))
    assert image.shape == (SIZE[1], SIZE[0], 3)
    pipe: Any = FluxFillPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    picture, mask = Image.open(io.BytesIO(PICTURE)).convert("RGB"), Image.open(io.BytesIO(MASK))
    box = pipe.mask_processor.get_crop_region(mask, 32, 32, pad=8)

    def cut(processor: Any, whole: Image.Image) -> Image.Image:
        cropped: Image.Image = processor.resize(whole.crop(box), 32, 32, resize_mode="fill")
        return cropped

    painted = pipe(
        prompt=params.prompt, image=cut(pipe.image_processor, picture),
        mask_image=cut(pipe.mask_processor, mask), height=32, width=32,
        num_inference_steps=params.steps, generator=torch.Generator("cpu").manual_seed(1234),
    ).images[0]  # fmt: skip
    reference = pipe.image_processor.apply_overlay(mask, picture, painted, box)
    assert max_diff(image, pixels(reference)) == 0


def test_a_paused_inpaint_resumes_in_a_fresh_runner_to_the_same_image(
    model: ModelInfo, runner: Runner, tmp_path: Path
) -> None:
    params = fill_params(seed=7, strength=0.9)  # a trimmed schedule resumes as trimmed
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    paused = ours(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(tmp_path / "job.ckpt").checkpoint
    assert saved.family == "flux1-fill" and FILL_CONDITION in saved.conditioning
    resumed = ours(runner_for(model), params, tmp_path, "job")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    assert max_diff(image_of(resumed), whole) == 0


def test_a_job_without_a_mask_is_refused_at_submit_in_one_sentence(folder: Path) -> None:
    search = ModelSearchPath(user=(folder.parent,))
    name = folder.name
    check_runnable(fill_params(model=name), search)
    sentence = "Flux.1 Fill only inpaints and outpaints: it needs a picture and a mask"
    for changes in ({"init_image": "", "mask": ""}, {"mask": ""}):  # text to image, img2img
        with pytest.raises(InvalidParameters, match=re.escape(sentence)) as refused:
            check_runnable(fill_params(model=name, **changes), search)
        assert str(refused.value).count("Flux.1 Fill") == 1


def test_in_bfloat16_an_inpaint_equals_the_stock_pipeline_and_resumes_exactly(
    folder: Path, model: ModelInfo, tmp_path: Path
) -> None:
    bf16 = DeviceChoice("cpu", "bfloat16")
    params = fill_params()
    runner = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    assert runner.load("m").pipe.transformer.dtype == torch.bfloat16
    assert max_diff(whole, stock(folder, params, RunInputs(PICTURE, MASK), torch.bfloat16)) == 0
    paused = ours(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    fresh = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    assert max_diff(image_of(ours(fresh, params, tmp_path, "job")), whole) == 0


def test_a_fill_transformer_file_is_refused_in_one_sentence() -> None:
    """FLUX.1-Fill-dev's one file (384 input channels) is not Flux.1's: said, not misread."""
    shapes = {
        "double_blocks.0.img_attn.qkv.weight": [9216, 3072],
        "img_in.weight": [3072, 384],
        "txt_in.weight": [3072, 4096],
        "vector_in.in_layer.weight": [3072, 768],
        "guidance_in.in_layer.weight": [3072, 256],
    }
    detected = detect_transformer_file(Path("flux1-fill-dev.safetensors"), shapes)
    assert detected.architecture is None
    assert detected.unsupported_reason == f"flux1-fill-dev: {FILL_FILE_REFUSAL}"
