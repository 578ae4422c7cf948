"""Flux.2 Klein through Easel's own loop, on tiny random base (true CFG) and step-distilled
folders: the image is stock `Flux2KleinPipeline`'s as its users call it, an inpaint (whole
picture and "only masked") stock `Flux2KleinInpaintPipeline`'s, a pause resumes in a fresh
process to the same image, so does a crash after a rolling checkpoint (text to image and
inpaint), and what Klein cannot take (img2img) is refused at submit in one sentence."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import Flux2KleinInpaintPipeline, Flux2KleinPipeline
from diffusers.image_processor import VaeImageProcessor
from PIL import Image

from app.engine.generation.device import CPU, DeviceChoice
from app.engine.generation.families import family_of
from app.engine.generation.families.klein.model import NEGATIVE_EMBEDS, Flux2KleinFamily
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.loop import inpaint
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.klein import write_tiny_klein, write_tiny_klein_lora
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.test_inpaint import MASK_DIGEST, mask_png
from tests.engine.generation.tiny_architectures import (
    Crash,
    checkpoint_then_crash,
    generate,
    max_diff,
    model_info,
    pause_at,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

KINDS = ("base", "distilled")
STEPS, PAUSE_AT = 3, 1


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("klein")
    return {
        kind: write_tiny_klein(root / f"klein-{kind}", is_distilled=kind == "distilled")
        for kind in KINDS
    }


@pytest.fixture(scope="module")
def models(folders: dict[str, Path]) -> dict[str, ModelInfo]:
    return {kind: model_info(folder) for kind, folder in folders.items()}


@pytest.fixture(scope="module")
def runners(models: dict[str, ModelInfo]) -> dict[str, Runner]:
    return {kind: runner_for(model) for kind, model in models.items()}


def klein_params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "the cat", "model": "m", "steps": STEPS, "cfg": 4.0, "width": 64,
        "height": 48, "seed": 1234,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def stock(folder: Path, params: GenerationParams) -> np.ndarray:
    """The stock pipeline's image, called as its model card says (the base model with a
    guidance scale; the distilled one the same call, its guidance ignored)."""
    pipe: Any = Flux2KleinPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    image = pipe(
        prompt=params.prompt,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        height=params.height,
        width=params.width,
        generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]
    return pixels(image)


SIZE = (64, 48)
# 3 steps at strength 0.6: the stock pipeline's `get_timesteps` skips int(3 - 1.8) = 1.
INPAINT = {"init_image": "job:1", "mask": MASK_DIGEST, "strength": 0.6, "mask_blur": 4}
ONLY_MASKED = {**INPAINT, "only_masked": True, "mask_padding": 4}
# The stock inpaint pipeline's own defaults: its users' call names none of them.
STOCK_DEFAULTS = {**INPAINT, "steps": 50, "cfg": 8.0, "strength": 0.8}


def mask_of(params: GenerationParams) -> bytes:
    """The job's mask: "only masked" a small one, so that its box leaves picture around."""
    return mask_png(SIZE, (28, 20, 36, 28) if params.only_masked else (16, 8, 48, 40))


def stock_inpaint(
    folder: Path, params: GenerationParams, defaults: bool = False, **load: Any
) -> np.ndarray:
    """The stock inpaint pipeline's image, called as its documentation shows: the picture,
    the mask blurred by its mask processor, the generator (and `padding_mask_crop` for
    "only masked"); no size, as it draws at the picture's own; strength, steps and guidance
    as the job's, or (`defaults`) none, its own defaults. `load`: `from_pretrained`'s."""
    pipe: Any = Flux2KleinInpaintPipeline.from_pretrained(folder, local_files_only=True, **load)
    pipe.set_progress_bar_config(disable=True)
    mask = Image.open(io.BytesIO(mask_of(params)))
    given: dict[str, Any] = {}
    if not defaults:
        given = {
            "strength": params.strength, "num_inference_steps": params.steps,
            "guidance_scale": params.cfg,
        }  # fmt: skip
    if params.only_masked:
        given["padding_mask_crop"] = params.mask_padding
    image = pipe(
        prompt=params.prompt,
        image=Image.open(io.BytesIO(init_png(SIZE))),
        mask_image=pipe.mask_processor.blur(mask, blur_factor=params.mask_blur),
        generator=torch.Generator("cpu").manual_seed(params.seed),
        **given,
    ).images[0]
    return pixels(image)


def run_inpaint(
    runner: Runner, params: GenerationParams, out: Path, ckpt: Path, **kwargs: Any
) -> Any:
    """Easel's run of the inpaint `params`, handed the picture and mask they name."""
    return runner.run(
        params, RunInputs(init_image=init_png(SIZE), mask=mask_of(params)), output_path=out,
        checkpoint_path=ckpt, **kwargs,
    )  # fmt: skip


def test_klein_folders_are_detected_as_flux2_klein(models: dict[str, ModelInfo]) -> None:
    for model in models.values():
        assert model.architecture is Architecture.FLUX2_KLEIN and model.native_size == 1024


@pytest.mark.parametrize("kind", KINDS)
def test_easel_draws_the_stock_klein_pipelines_image(
    folders: dict[str, Path], runners: dict[str, Runner], tmp_path: Path, kind: str
) -> None:
    params = klein_params()
    ours = generate(runners[kind], params, tmp_path, "ours")
    assert ours.shape == (48, 64, 3)
    assert max_diff(ours, stock(folders[kind], params)) == 0
    # The base model's CFG reads the guidance scale; the distilled one ignores it.
    other_guidance = generate(runners[kind], klein_params(cfg=1.5), tmp_path, "other")
    assert (max_diff(ours, other_guidance) > 0) == (kind == "base")


INPAINTS = {"stock defaults": STOCK_DEFAULTS, "whole": INPAINT, "only masked": ONLY_MASKED}


@pytest.mark.parametrize(
    ("kind", "area"),
    [("base", "stock defaults"), ("distilled", "whole"), ("base", "only masked")],
)
def test_a_klein_inpaint_draws_the_stock_inpaint_pipelines_image(
    folders: dict[str, Path], runners: dict[str, Runner], tmp_path: Path, kind: str, area: str
) -> None:
    """Whole picture on the base model at the stock pipeline's defaults (50 steps, guidance
    8, strength 0.8: the call names none), on the distilled one at 3 steps trimmed to 2 by
    strength 0.6; "only masked" (its `padding_mask_crop`) on the base model."""
    params = klein_params(**INPAINTS[area])
    outcome = run_inpaint(
        runners[kind], params, tmp_path / "ours.png", tmp_path / "ours.ckpt",
        on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    ours = pixels(outcome.image_path)
    assert ours.shape == (48, 64, 3)
    stock_image = stock_inpaint(folders[kind], params, defaults=area == "stock defaults")
    assert max_diff(ours, stock_image) == 0
    picture = pixels(Image.open(io.BytesIO(init_png(SIZE))))
    assert max_diff(ours, picture) > 50  # the masked area is redrawn
    if area == "only masked":  # outside the box generated: the picture itself
        mask = VaeImageProcessor.blur(Image.open(io.BytesIO(mask_of(params))), 4)
        left, top, right, bottom = VaeImageProcessor.get_crop_region(mask, 64, 48, pad=4)
        assert (left, top, right, bottom) != (0, 0, 64, 48)
        kept = np.ones(ours.shape[:2], dtype=bool)
        kept[top:bottom, left:right] = False
        assert max_diff(ours[kept], picture[kept]) == 0


def test_a_negative_prompt_is_what_the_base_models_unconditional_call_reads(
    runners: dict[str, Runner], tmp_path: Path
) -> None:
    """The stock pipeline's negative prompt is always "" (the image above); another one
    changes the image, as the stock pipeline given its embeddings would."""
    plain = generate(runners["base"], klein_params(), tmp_path, "plain")
    negative = generate(runners["base"], klein_params(negative_prompt="a dog"), tmp_path, "neg")
    assert max_diff(plain, negative) > 0


def test_a_klein_checkpoint_carries_its_conditioning_and_flow_schedule(
    runners: dict[str, Runner], tmp_path: Path
) -> None:
    runner = runners["base"]
    family = family_of(runner.load("m").pipe)
    assert isinstance(family, Flux2KleinFamily) and family.uses_cfg(klein_params())
    ckpt = tmp_path / "job.ckpt"
    outcome = runner.run(
        klein_params(), output_path=tmp_path / "job.png", checkpoint_path=ckpt,
        on_step=pause_at(PAUSE_AT),
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(ckpt).checkpoint
    assert saved.family == "flux2-klein"
    assert set(saved.conditioning) == {*family.checkpoint_tensors, NEGATIVE_EMBEDS}
    assert saved.scheduler_class == "FlowMatchEulerDiscreteScheduler"
    assert saved.scheduler_state["step_index"] == PAUSE_AT
    sigmas = saved.scheduler_state["sigmas"]
    assert sigmas.shape == (STEPS + 1,) and float(sigmas[0]) == 1.0 and float(sigmas[-1]) == 0.0
    assert float(sigmas[1]) != 2 / 3  # shifted by the empirical mu
    assert saved.latents.shape == (1, 32, 3, 4)  # 2x2 patches of the 8-channel latents


def _resume_all(jobs: list[tuple[ModelInfo, GenerationParams, Path, Path]]) -> None:
    for model, params, out, ckpt in jobs:
        outcome = runner_for(model).run(
            params, output_path=out, checkpoint_path=ckpt,
            on_step=lambda _p: StepDecision.CONTINUE,
        )  # fmt: skip
        assert outcome.resumed_from is not None and outcome.resumed_from.step == PAUSE_AT


def test_a_paused_and_a_crashed_klein_job_resume_in_a_fresh_process_to_the_same_image(
    models: dict[str, ModelInfo],
    runners: dict[str, Runner],
    tmp_path: Path,
    fresh_process: Callable[..., Any],
) -> None:
    jobs = []
    for kind in KINDS:  # paused at step k, both kinds
        params = klein_params(seed=7)
        out, ckpt = tmp_path / f"{kind}.png", tmp_path / f"{kind}.ckpt"
        paused = runners[kind].run(
            params, output_path=out, checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT)
        )
        assert paused.kind is OutcomeKind.PAUSED
        jobs.append((models[kind], params, out, ckpt))
    crashed = klein_params(seed=8, width=48, height=64, negative_prompt="blur")
    out, ckpt = tmp_path / "crashed.png", tmp_path / "crashed.ckpt"
    with pytest.raises(Crash):
        runners["base"].run(
            crashed, output_path=out, checkpoint_path=ckpt, on_step=checkpoint_then_crash(PAUSE_AT)
        )
    assert ckpt.exists() and not out.exists()
    jobs.append((models["base"], crashed, out, ckpt))
    fresh_process(_resume_all, jobs)  # spawned, as a worker after a crash
    for index, (model, params, out, ckpt) in enumerate(jobs):
        kind = "base" if model is models["base"] else "distilled"
        reference = generate(runners[kind], params, tmp_path, f"reference-{index}")
        assert not ckpt.exists()
        assert max_diff(reference, pixels(out)) == 0, (kind, params.seed)


def _resume_inpaints(jobs: list[tuple[ModelInfo, GenerationParams, Path, Path]]) -> None:
    for model, params, out, ckpt in jobs:
        outcome = run_inpaint(
            runner_for(model), params, out, ckpt, on_step=lambda _p: StepDecision.CONTINUE
        )
        assert outcome.resumed_from is not None and outcome.resumed_from.step == PAUSE_AT


def test_a_paused_and_a_crashed_klein_inpaint_resume_in_a_fresh_process_to_the_same_image(
    models: dict[str, ModelInfo],
    runners: dict[str, Runner],
    tmp_path: Path,
    fresh_process: Callable[..., Any],
) -> None:
    """The base model's inpaint paused (CFG: both prompts' embeddings in the checkpoint), the
    distilled one's "only masked" crashed after a rolling checkpoint: each checkpoint carries
    the mask, the image latents and the noise, and the resumed image is the uninterrupted."""
    paused = klein_params(seed=7, **INPAINT)
    out, ckpt = tmp_path / "paused.png", tmp_path / "paused.ckpt"
    outcome = run_inpaint(runners["base"], paused, out, ckpt, on_step=pause_at(PAUSE_AT))
    assert outcome.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(ckpt).checkpoint.conditioning
    assert {inpaint.MASK, inpaint.IMAGE_LATENTS, inpaint.NOISE, NEGATIVE_EMBEDS} <= set(saved)
    assert saved[inpaint.MASK].shape == (1, 1, 3, 4)  # bilinear, on the patch grid
    jobs = [(models["base"], paused, out, ckpt)]
    crashed = klein_params(seed=8, **ONLY_MASKED)
    out, ckpt = tmp_path / "crashed.png", tmp_path / "crashed.ckpt"
    with pytest.raises(Crash):
        run_inpaint(
            runners["distilled"], crashed, out, ckpt, on_step=checkpoint_then_crash(PAUSE_AT)
        )
    assert ckpt.exists() and not out.exists()
    jobs.append((models["distilled"], crashed, out, ckpt))
    fresh_process(_resume_inpaints, jobs)  # spawned, as a worker after a crash
    for index, (model, params, out, ckpt) in enumerate(jobs):
        kind = "base" if model is models["base"] else "distilled"
        reference = run_inpaint(
            runners[kind], params, tmp_path / f"ref-{index}.png", tmp_path / f"ref-{index}.ckpt",
            on_step=lambda _p: StepDecision.CONTINUE,
        )  # fmt: skip
        assert reference.image_path is not None and not ckpt.exists()
        assert max_diff(pixels(reference.image_path), pixels(out)) == 0, (kind, params.seed)


def test_what_klein_cannot_take_is_refused_at_submit_in_one_sentence(
    folders: dict[str, Path],
) -> None:
    search = ModelSearchPath(user=(folders["base"].parent,))
    name = folders["base"].name
    check_runnable(klein_params(model=name, negative_prompt="blurry"), search)
    check_runnable(klein_params(model=name, **INPAINT), search)  # inpaint: an image and a mask
    check_runnable(klein_params(model=name, **ONLY_MASKED), search)
    refused = {
        "scheduler": ("DPM++ 2M", "run with the Euler sampler (flow matching), not 'DPM++ 2M'"),
        "width": (72, "multiples of 16 pixels, not 72x48"),
        "init_image": (
            "job:1",
            "Flux.2 Klein cannot run img2img in Easel (an init image without a mask), only "
            "text to image and inpaint; add a mask or clear the init image",
        ),
    }
    for field, (value, message) in refused.items():
        with pytest.raises(InvalidParameters, match=re.escape(message)):
            check_runnable(klein_params(model=name, **{field: value}), search)
    # A step-distilled model runs without CFG: a negative prompt would change nothing.
    distilled = folders["distilled"].name
    check_runnable(klein_params(model=distilled), search)
    with pytest.raises(InvalidParameters, match="step-distilled and runs without CFG"):
        check_runnable(klein_params(model=distilled, negative_prompt="blurry"), search)


def test_a_klein_job_shows_previews_and_runs_the_same_in_low_vram_mode(
    models: dict[str, ModelInfo], runners: dict[str, Runner], tmp_path: Path
) -> None:
    """Previews undo the VAE's batch norm and the 2x2 patching before decoding; low-VRAM
    mode (on a CPU: VAE tiling above the tile size; model CPU offload needs a GPU) draws the
    same image."""
    low_vram = Runner(
        device=replace(CPU, low_vram=True), resolve=lambda _n: models["distilled"], threads=1,
        preview_interval_s=0,
    )  # fmt: skip
    previews: list[bytes] = []

    def watch(progress: StepProgress) -> StepDecision:
        assert progress.preview_png is not None
        previews.append(progress.preview_png)
        return StepDecision.CONTINUE

    params = klein_params()
    outcome = low_vram.run(
        params, output_path=tmp_path / "p.png", checkpoint_path=tmp_path / "p.ckpt",
        on_step=watch,
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.COMPLETED and len(previews) == STEPS
    assert Image.open(io.BytesIO(previews[-1])).size == (64, 48)
    assert low_vram.load("m").pipe.vae.use_tiling
    plain = generate(runners["distilled"], params, tmp_path, "plain")
    assert max_diff(pixels(tmp_path / "p.png"), plain) == 0


def test_in_bfloat16_klein_equals_the_stock_pipeline_and_resumes_exactly(
    folders: dict[str, Path], models: dict[str, ModelInfo], tmp_path: Path
) -> None:
    """bfloat16 arithmetic as on an Ampere GPU, run here on the CPU (the text encoder, the
    transformer and the VAE in it, as the stock pipeline loaded with dtype=bfloat16); an
    inpaint too (its mask, image latents and noise in bfloat16)."""
    bf16 = DeviceChoice("cpu", "bfloat16")
    runner = Runner(device=bf16, resolve=lambda _n: models["base"], threads=1)
    params = klein_params()
    image = generate(runner, params, tmp_path, "ours")
    assert runner.load("m").pipe.transformer.dtype == torch.bfloat16
    pipe: Any = Flux2KleinPipeline.from_pretrained(
        folders["base"], dtype=torch.bfloat16, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    stock_image = pipe(
        prompt=params.prompt, num_inference_steps=params.steps, guidance_scale=params.cfg,
        height=params.height, width=params.width,
        generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]  # fmt: skip
    assert max_diff(image, pixels(stock_image)) == 0
    out, ckpt = tmp_path / "job.png", tmp_path / "job.ckpt"
    paused = runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    fresh = Runner(device=bf16, resolve=lambda _n: models["base"], threads=1)
    resumed = fresh.run(
        params, output_path=out, checkpoint_path=ckpt, on_step=lambda _p: StepDecision.CONTINUE
    )
    assert resumed.resumed_from is not None
    assert max_diff(pixels(out), image) == 0
    masked = klein_params(**INPAINT)
    inpainted = run_inpaint(
        runner, masked, tmp_path / "inpaint.png", tmp_path / "inpaint.ckpt",
        on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    assert inpainted.image_path is not None
    stock_inpainted = stock_inpaint(folders["base"], masked, dtype=torch.bfloat16)
    assert max_diff(pixels(inpainted.image_path), stock_inpainted) == 0


def test_a_klein_lora_equals_diffusers_load_lora_weights_and_leaves_with_its_job(
    folders: dict[str, Path], models: dict[str, ModelInfo], tmp_path: Path
) -> None:
    lora = write_tiny_klein_lora(tmp_path / "lora" / "sketch.safetensors")
    model = models["base"]
    runner = Runner(
        device=CPU, resolve=lambda _n: model, threads=1,
        cache=PipelineCache(lora_folders=[lora.parent]),
    )  # fmt: skip
    with_lora = klein_params(prompt="the cat <lora:sketch:1>")
    ours = generate(runner, with_lora, tmp_path, "lora")
    pipe: Any = Flux2KleinPipeline.from_pretrained(folders["base"], local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    pipe.load_lora_weights(str(lora))
    stock_image = pipe(
        prompt="the cat", num_inference_steps=STEPS, guidance_scale=with_lora.cfg,
        height=with_lora.height, width=with_lora.width,
        generator=torch.Generator("cpu").manual_seed(with_lora.seed),
    ).images[0]  # fmt: skip
    assert max_diff(ours, pixels(stock_image)) == 0
    without = generate(runner, klein_params(), tmp_path, "plain")  # the next job names none
    assert max_diff(without, stock(folders["base"], klein_params())) == 0
    assert max_diff(ours, without) > 0
