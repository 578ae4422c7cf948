"""Qwen-Image-Edit Plus with several input images through Easel's own loop: an edit of 2 and
3 pictures (the edited one first, then the job's further ones) is stock
`QwenImageEditPlusPipeline`'s image called with the list of pictures (its defaults but the
job's steps, size and `true_cfg_scale`), in float32 and bfloat16; a paused one resumes in a
fresh runner to the same image; too many pictures, or several on a model that reads one,
are refused at submit in one sentence and nothing is stored.

The input area is shrunk as `test_qwen_edit.py` shrinks it (the same monkeypatch)."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from diffusers import QwenImageEditPlusPipeline
from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit, pipeline_qwenimage_edit_plus
from PIL import Image

from app.engine.generation.device import DeviceChoice
from app.engine.generation.families.flow_params import flow_problems
from app.engine.generation.families.qwen.edit import input_latents_key
from app.engine.generation.families.qwen.processor import image_only_processor
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.runner import Runner
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.params import (
    KIND_EDIT,
    GenerationParams,
    InvalidParameters,
    encode_edit_images,
)
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.qwen import write_tiny_qwen_edit
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.test_qwen_edit import small_dimensions, small_plus_dimensions
from tests.engine.generation.tiny_architectures import max_diff, model_info, pause_at, pixels

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT = 3, 1
# The edited picture (4:3) and two more of other shapes, so each has a patch grid of its own.
PICTURES = ((64, 48), (48, 64), (64, 64))


def picture(index: int) -> bytes:
    return init_png(PICTURES[index])


@pytest.fixture(autouse=True)
def small_input_area(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline_qwenimage_edit, "calculate_dimensions", small_dimensions)
    monkeypatch.setattr(pipeline_qwenimage_edit_plus, "calculate_dimensions", small_plus_dimensions)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen_edit(tmp_path_factory.mktemp("plus") / "plus", plus=True)


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder)


def runner_in(model: ModelInfo, dtype: str = "float32") -> Runner:
    return Runner(device=DeviceChoice("cpu", dtype), resolve=lambda _n: model, threads=1)


def edit_params(images: int, **changes: Any) -> GenerationParams:
    more = encode_edit_images([digest(picture(index)) for index in range(1, images)])
    base: dict[str, Any] = {
        "prompt": "put the cat of picture 2 on the sofa", "negative_prompt": "blurry",
        "model": "m", "steps": STEPS, "cfg": 4.0, "width": 64, "height": 48, "seed": 1234,
        "kind": KIND_EDIT, "init_image": "job:1", "edit_images": more,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def inputs_for(images: int, changed: int | None = None) -> RunInputs:
    """The edited picture and the further ones (`changed`: that one drawn at another size)."""
    pngs = [picture(index) for index in range(images)]
    if changed is not None:
        pngs[changed] = init_png((32, 32))
    return RunInputs(init_image=pngs[0], edit_images=pngs[1:])


def stock(folder: Path, params: GenerationParams, images: int, dtype: torch.dtype) -> Any:
    """The stock pipeline called as its documentation shows for several pictures: `image`
    a list, the instruction, the negative prompt, `true_cfg_scale`, the generator."""
    processor = image_only_processor(folder / "processor")
    pipe: Any = QwenImageEditPlusPipeline.from_pretrained(
        folder, processor=processor, dtype=dtype, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe(
        image=[Image.open(io.BytesIO(picture(index))) for index in range(images)],
        prompt=params.prompt, negative_prompt=params.negative_prompt,
        true_cfg_scale=params.cfg, num_inference_steps=params.steps, height=params.height,
        width=params.width, generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]  # fmt: skip


def ours(
    runner: Runner, params: GenerationParams, inputs: RunInputs, folder: Path, name: str,
    **kwargs: Any,
) -> Any:  # fmt: skip
    kwargs.setdefault("on_step", lambda _p: StepDecision.CONTINUE)
    return runner.run(
        params, inputs, output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt", **kwargs,
    )  # fmt: skip


def image_of(outcome: Any) -> Any:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


@pytest.mark.parametrize(
    ("images", "dtype"), [(2, "float32"), (3, "float32"), (2, "bfloat16")]
)  # fmt: skip
def test_an_edit_of_several_pictures_is_the_stock_pipelines_image_and_resumes_exactly(
    folder: Path, model: ModelInfo, tmp_path: Path, images: int, dtype: str
) -> None:
    params = edit_params(images)
    runner = runner_in(model, dtype)
    whole = image_of(ours(runner, params, inputs_for(images), tmp_path, "whole"))
    reference = stock(folder, params, images, getattr(torch, dtype))
    assert max_diff(whole, pixels(reference)) == 0
    paused = ours(runner, params, inputs_for(images), tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(tmp_path / "job.ckpt").checkpoint
    assert {input_latents_key(index) for index in range(images)} <= set(saved.conditioning)
    resumed = ours(runner_in(model, dtype), params, inputs_for(images), tmp_path, "job")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    assert max_diff(image_of(resumed), whole) == 0


def test_the_further_pictures_are_read(model: ModelInfo, tmp_path: Path) -> None:
    """Another last picture (its bytes named by the parameters) edits otherwise."""
    runner = runner_in(model)
    outcome = ours(runner, edit_params(3), inputs_for(3), tmp_path, "whole")
    whole = image_of(outcome)
    recorded = Image.open(outcome.image_path).info["parameters"]  # every input image named
    names = [digest(png) for png in inputs_for(3).edit_images]
    assert f"Edit image: job:1, Edit image 2: {names[0]}, Edit image 3: {names[1]}" in recorded
    other_inputs = inputs_for(3, changed=2)
    names = [digest(png) for png in other_inputs.edit_images]
    other_params = edit_params(3, edit_images=encode_edit_images(names))
    other = image_of(ours(runner, other_params, other_inputs, tmp_path, "other"))
    assert max_diff(whole, other) > 0


def test_inputs_that_are_not_the_named_pictures_are_refused(
    model: ModelInfo, tmp_path: Path
) -> None:
    with pytest.raises(InvalidParameters, match="input image 3's bytes are not the image it names"):
        ours(runner_in(model), edit_params(3), inputs_for(3, changed=2), tmp_path, "bad")


@pytest.mark.parametrize(
    ("architecture", "label"),
    [(Architecture.QWEN_IMAGE_EDIT, "Qwen-Image-Edit"),
     (Architecture.FLUX1_KONTEXT, "Flux.1 Kontext")],
)  # fmt: skip
def test_several_pictures_on_a_model_that_reads_one_are_refused_in_one_sentence(
    architecture: Architecture, label: str
) -> None:
    problems = flow_problems(architecture, edit_params(2, negative_prompt="", cfg=2.5))
    assert problems == [
        f"{label} edits one input image, not 2; give only the picture it edits "
        "(Qwen-Image-Edit Plus reads several)"
    ]
    assert flow_problems(Architecture.QWEN_IMAGE_EDIT_PLUS, edit_params(3)) == []


def test_more_pictures_than_edit_plus_reads_are_refused_and_nothing_is_stored(
    queue: JobQueue,
) -> None:
    four = [init_png((32 + 8 * index, 32)) for index in range(4)]
    params = edit_params(1, init_image=digest(four[0]), edit_images=encode_edit_images(
        [digest(png) for png in four[1:]]
    ))  # fmt: skip
    too_many = "an edit reads at most 3 input images, not 4"
    with pytest.raises(InvalidParameters, match=re.escape(too_many)):
        queue.submit(params, inputs=RunInputs(init_image=four[0], edit_images=four[1:]))
    assert queue.jobs() == []
