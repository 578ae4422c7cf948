"""Chroma through Easel's own loop, on a tiny random folder: text to image (at the stock
pipeline's own defaults, and with a negative prompt), img2img and inpaint are stock
`ChromaPipeline`'s, `ChromaImg2ImgPipeline`'s and `ChromaInpaintPipeline`'s images as their
users call them, in float32 and in bfloat16; a job paused at step k resumes in a fresh
runner to the uninterrupted image; what Chroma cannot take is refused in one sentence."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import ChromaImg2ImgPipeline, ChromaInpaintPipeline, ChromaPipeline
from PIL import Image

from app.engine.generation.device import DeviceChoice
from app.engine.generation.families import family_of
from app.engine.generation.families.chroma.model import (
    ATTENTION_MASK,
    NEGATIVE_MASK,
    ChromaFamily,
)
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.chroma import write_tiny_chroma
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
SIZE = (64, 48)
MASK_BOX = (16, 8, 48, 40)
# The stock pipelines' own defaults (35 steps, guidance 5; img2img and inpaint strength
# 0.9 and 0.6), which their users' calls leave out: the jobs below say them.
DEFAULTS = {"steps": 35, "cfg": 5.0}
JOBS: dict[str, dict[str, Any]] = {
    "txt2img defaults": DEFAULTS,
    "txt2img negative": {"negative_prompt": "a dog", "cfg": 4.0},
    "img2img": {"init_image": "job:1", "strength": 0.9},
    "inpaint": {"init_image": "job:1", "strength": 0.6, "mask": MASK_DIGEST, "mask_blur": 4},
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_chroma(tmp_path_factory.mktemp("chroma") / "chroma")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder)


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


def chroma_params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "the cat", "model": "m", "steps": STEPS, "cfg": 5.0, "width": 64,
        "height": 48, "seed": 1234,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def stock(folder: Path, params: GenerationParams, dtype: torch.dtype = torch.float32) -> Any:
    """The stock pipeline's image, called as its documentation shows (`stock_call`)."""
    return stock_call(stock_pipeline(folder, params, dtype), params)


def stock_pipeline(folder: Path, params: GenerationParams, dtype: torch.dtype) -> Any:
    """The stock pipeline of `params`' job, loaded in `dtype`."""
    cls = (
        ChromaInpaintPipeline
        if params.mask
        else ChromaImg2ImgPipeline
        if params.init_image
        else ChromaPipeline
    )
    pipe: Any = cls.from_pretrained(folder, dtype=dtype, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    if params.mask:
        # diffusers 0.42's inpaint pipeline reads `guidance_embeds` from the transformer's
        # config, which Chroma's has not (AttributeError), and never passes the guidance it
        # makes of it on: its users say False, which changes no number.
        pipe.transformer.register_to_config(guidance_embeds=False)
    return pipe


def stock_call(pipe: Any, params: GenerationParams) -> Any:
    """The stock pipeline's image, called as its documentation shows: the prompt (and a
    negative one if the job has it), size, steps, guidance and the seeded generator;
    img2img and inpaint the picture (the mask blurred first by its mask processor)."""
    inputs: dict[str, Any] = {}
    if params.negative_prompt:
        inputs["negative_prompt"] = params.negative_prompt
    if params.init_image:
        inputs["image"] = Image.open(io.BytesIO(init_png(SIZE)))
        inputs["strength"] = params.strength
    if params.mask:
        mask = Image.open(io.BytesIO(mask_png(SIZE, MASK_BOX)))
        inputs["mask_image"] = pipe.mask_processor.blur(mask, params.mask_blur)
    return pipe(
        params.prompt, num_inference_steps=params.steps, guidance_scale=params.cfg,
        height=params.height, width=params.width,
        generator=torch.Generator("cpu").manual_seed(params.seed), **inputs,
    ).images[0]  # fmt: skip


def ours(runner: Runner, params: GenerationParams, folder: Path, name: str, **kwargs: Any) -> Any:
    """Easel's run of `params`, with the picture and mask they name."""
    init = init_png(SIZE) if params.init_image else None
    mask = mask_png(SIZE, MASK_BOX) if params.mask else None
    kwargs.setdefault("on_step", lambda _p: StepDecision.CONTINUE)
    return runner.run(
        params, RunInputs(init_image=init, mask=mask), output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt", **kwargs,
    )  # fmt: skip


def image_of(outcome: Any) -> np.ndarray:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


def test_a_chroma_folder_is_detected_as_chroma(model: ModelInfo) -> None:
    assert model.architecture is Architecture.CHROMA and model.native_size == 1024


@pytest.mark.parametrize("job", JOBS)
def test_easel_draws_the_stock_chroma_pipelines_image(
    folder: Path, runner: Runner, tmp_path: Path, job: str
) -> None:
    params = chroma_params(**JOBS[job])
    image = image_of(ours(runner, params, tmp_path, "ours"))
    assert image.shape == (48, 64, 3)
    assert max_diff(image, pixels(stock(folder, params))) == 0


def test_the_negative_prompt_and_the_guidance_change_the_image(
    runner: Runner, tmp_path: Path
) -> None:
    """True CFG: the negative prompt is what the second call reads; cfg 1 runs without."""
    plain = image_of(ours(runner, chroma_params(), tmp_path, "plain"))
    negative = image_of(ours(runner, chroma_params(negative_prompt="a dog"), tmp_path, "neg"))
    unguided = image_of(ours(runner, chroma_params(cfg=1.0), tmp_path, "one"))
    assert max_diff(plain, negative) > 0 and max_diff(plain, unguided) > 0


@pytest.mark.parametrize("job", ["txt2img negative", "img2img", "inpaint"])
def test_a_paused_chroma_job_resumes_in_a_fresh_runner_to_the_same_image(
    model: ModelInfo, runner: Runner, tmp_path: Path, job: str
) -> None:
    params = chroma_params(**JOBS[job])
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    paused = ours(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(tmp_path / "job.ckpt").checkpoint
    assert saved.family == "chroma"
    assert {ATTENTION_MASK, NEGATIVE_MASK} <= set(saved.conditioning)
    family = family_of(runner.load("m").pipe)
    assert isinstance(family, ChromaFamily)
    assert set(family.checkpoint_needs(params)) <= set(saved.conditioning)
    resumed = ours(runner_for(model), params, tmp_path, "job")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    assert max_diff(image_of(resumed), whole) == 0


def test_in_bfloat16_chroma_equals_the_stock_pipeline_and_resumes_exactly(
    folder: Path, model: ModelInfo, tmp_path: Path
) -> None:
    """bfloat16 arithmetic as on an Ampere GPU, on the CPU (T5, the transformer and the VAE
    in it, as the stock pipeline loaded with dtype=bfloat16); the other jobs and float16
    are benchmarks/dtype_matrix_flow.py's (test_half_precision_flow runs one)."""
    bf16 = DeviceChoice("cpu", "bfloat16")
    params = chroma_params(**JOBS["txt2img negative"])
    runner = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    whole = image_of(ours(runner, params, tmp_path, "whole"))
    assert runner.load("m").pipe.transformer.dtype == torch.bfloat16
    assert max_diff(whole, pixels(stock(folder, params, torch.bfloat16))) == 0
    paused = ours(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    fresh = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    assert max_diff(image_of(ours(fresh, params, tmp_path, "job")), whole) == 0


def test_what_chroma_cannot_take_is_refused_at_submit_in_one_sentence(folder: Path) -> None:
    search = ModelSearchPath(user=(folder.parent,))
    name = folder.name
    check_runnable(chroma_params(model=name, negative_prompt="blurry"), search)
    check_runnable(chroma_params(model=name, **JOBS["inpaint"]), search)
    refused = {
        "scheduler": (
            "DPM++ 2M",
            "Chroma models run with the Euler sampler (flow matching), not 'DPM++ 2M'",
        ),
        "width": (72, "Chroma draws sizes in multiples of 16 pixels, not 72x48"),
    }
    for field, (value, message) in refused.items():
        with pytest.raises(InvalidParameters, match=re.escape(message)):
            check_runnable(chroma_params(model=name, **{field: value}), search)


@pytest.mark.parametrize("job", ["txt2img negative", "img2img"])
def test_the_transformer_sees_each_stock_pipelines_timesteps_in_bfloat16(
    folder: Path, model: ModelInfo, tmp_path: Path, job: str
) -> None:
    """The stock text-to-image (and inpaint) pipeline casts the timestep to the latents'
    dtype before dividing it by 1000, its img2img pipeline does not: in bfloat16 these are
    other numbers (the tiny model's pixels happen not to show it), and Easel's transformer
    calls get each pipeline's own, call by call."""
    params = chroma_params(**JOBS[job])
    runner = Runner(device=DeviceChoice("cpu", "bfloat16"), resolve=lambda _n: model, threads=1)
    pipe = runner.load("m").pipe
    ours_seen = _timesteps(pipe, lambda: ours(runner, params, tmp_path, "ours"))
    reference = stock_pipeline(folder, params, torch.bfloat16)
    stock_seen = _timesteps(reference, lambda: stock_call(reference, params))
    assert [(t.dtype, t.tolist()) for t in ours_seen] == [(t.dtype, t.tolist()) for t in stock_seen]
    assert {t.dtype for t in ours_seen} == {torch.float32 if job == "img2img" else torch.bfloat16}


def _timesteps(pipe: Any, run: Any) -> list[torch.Tensor]:
    """The `timestep` of each call of `pipe`'s transformer while `run()` runs."""
    seen: list[torch.Tensor] = []

    def keep(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        seen.append(kwargs["timestep"].clone())

    handle = pipe.transformer.register_forward_pre_hook(keep, with_kwargs=True)
    try:
        run()
    finally:
        handle.remove()
    return seen
