"""Flux.1 through Easel's own loop, on tiny random dev-style (a guidance embedder) and
schnell-style (none) folders: the image is stock `FluxPipeline`'s as its users call it,
a pause resumes in a fresh process to the same image, so does a crash after a rolling
checkpoint, a LoRA equals diffusers' `load_lora_weights` and is gone from the next job,
what Flux cannot take is refused at submit, and `python -m app generate` draws one."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import FluxImg2ImgPipeline, FluxInpaintPipeline, FluxPipeline
from PIL import Image

from app.engine.generation.device import CPU
from app.engine.generation.families import family_of
from app.engine.generation.families.flow import sentence_prompt
from app.engine.generation.families.flux.model import FluxFamily
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.flux import (
    write_tiny_flux,
    write_tiny_flux_kohya_lora,
    write_tiny_flux_lora,
)
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

KINDS = ("dev", "schnell")
STEPS, PAUSE_AT = 4, 2
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("flux")
    return {
        kind: write_tiny_flux(root / f"flux-{kind}", guidance_embeds=kind == "dev")
        for kind in KINDS
    }


@pytest.fixture(scope="module")
def models(folders: dict[str, Path]) -> dict[str, ModelInfo]:
    return {kind: model_info(folder) for kind, folder in folders.items()}


@pytest.fixture(scope="module")
def runners(models: dict[str, ModelInfo]) -> dict[str, Runner]:
    return {kind: runner_for(model) for kind, model in models.items()}


def flux_params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "the cat", "model": "m", "steps": STEPS, "cfg": 3.5, "width": 64,
        "height": 48, "seed": 1234,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


SIZE = (64, 48)
IMG2IMG = {"init_image": "job:1", "strength": 0.6}  # 4 steps at 0.6: Flux runs 3 (SD: 2)
INPAINT = {**IMG2IMG, "strength": 0.9, "mask": MASK_DIGEST, "mask_blur": 4}
MASK_BOX = (16, 8, 48, 40)


def stock(
    folder: Path, params: GenerationParams, lora: Path | None = None, **inputs: Any
) -> np.ndarray:
    """The image of the stock pipeline, called as its model card says (dev: a guidance
    scale; schnell: the same call, its guidance ignored); img2img and inpaint as theirs
    (the mask blurred first, as their documentation shows)."""
    cls = FluxInpaintPipeline if params.mask else FluxImg2ImgPipeline if inputs else FluxPipeline
    pipe: Any = cls.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    if lora is not None:
        pipe.load_lora_weights(str(lora))
    if params.mask:
        inputs["mask_image"] = pipe.mask_processor.blur(inputs["mask_image"], params.mask_blur)
    if params.init_image:
        inputs["strength"] = params.strength
    image = pipe(
        params.prompt.split(" <lora")[0],
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        height=params.height,
        width=params.width,
        generator=torch.Generator("cpu").manual_seed(params.seed),
        **inputs,
    ).images[0]
    return pixels(image)


def ours(
    runner: Runner, params: GenerationParams, folder: Path, name: str = "ours", **kwargs: Any
) -> Any:
    """Easel's run of `params`, with the picture and mask the params name."""
    init = init_png(SIZE) if params.init_image else None
    mask = mask_png(SIZE, MASK_BOX) if params.mask else None
    return runner.run(
        params, RunInputs(init_image=init, mask=mask), output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt", **kwargs,
    )  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_easel_draws_the_stock_flux_pipelines_image(
    folders: dict[str, Path], runners: dict[str, Runner], tmp_path: Path, kind: str
) -> None:
    params = flux_params()
    ours = generate(runners[kind], params, tmp_path, "ours")
    assert ours.shape == (48, 64, 3)
    assert max_diff(ours, stock(folders[kind], params)) == 0
    # dev takes the guidance as an input; schnell has no guidance embedder: cfg changes nothing.
    other_guidance = generate(runners[kind], flux_params(cfg=1.0), tmp_path, "other")
    assert (max_diff(ours, other_guidance) > 0) == (kind == "dev")


@pytest.mark.parametrize("kind", ["img2img", "inpaint", "inpaint only masked"])
def test_flux_img2img_and_inpaint_draw_their_stock_pipelines_image(
    folders: dict[str, Path], runners: dict[str, Runner], tmp_path: Path, kind: str
) -> None:
    changes: dict[str, Any] = IMG2IMG if kind == "img2img" else INPAINT
    inputs: dict[str, Any] = {"image": Image.open(io.BytesIO(init_png(SIZE)))}
    if kind != "img2img":
        inputs["mask_image"] = Image.open(io.BytesIO(mask_png(SIZE, MASK_BOX)))
    if kind == "inpaint only masked":
        changes = {**changes, "only_masked": True, "mask_padding": 8, "width": 32, "height": 32}
        inputs["padding_mask_crop"] = 8
    params = flux_params(**changes)
    outcome = ours(runners["dev"], params, tmp_path, on_step=lambda _p: StepDecision.CONTINUE)
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    image = pixels(outcome.image_path)
    assert image.shape == (48, 64, 3)
    assert max_diff(image, stock(folders["dev"], params, **inputs)) == 0
    if kind == "inpaint only masked":  # left of the box generated: the picture itself
        picture = pixels(Image.open(io.BytesIO(init_png(SIZE))))
        assert max_diff(image[:, :4], picture[:, :4]) == 0


def test_a_flux_checkpoint_carries_its_conditioning_and_flow_schedule(
    runners: dict[str, Runner], tmp_path: Path
) -> None:
    runner = runners["dev"]
    family = family_of(runner.load("m").pipe)
    assert isinstance(family, FluxFamily) and not family.uses_cfg(flux_params())
    ckpt = tmp_path / "job.ckpt"
    outcome = runner.run(
        flux_params(), output_path=tmp_path / "job.png", checkpoint_path=ckpt,
        on_step=pause_at(PAUSE_AT),
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(ckpt).checkpoint
    assert saved.family == "flux" and set(saved.conditioning) == set(family.checkpoint_tensors)
    assert saved.scheduler_class == "FlowMatchEulerDiscreteScheduler"
    assert saved.scheduler_state["step_index"] == PAUSE_AT
    sigmas = saved.scheduler_state["sigmas"]
    assert sigmas.shape == (STEPS + 1,) and float(sigmas[0]) == 1.0 and float(sigmas[-1]) == 0.0
    # dev's dynamic shift: 48x64 px is 12 patches, far below 256, so the schedule is shifted
    # by exp(mu) with mu below base_shift: the second sigma is not the unshifted 0.75.
    assert float(sigmas[1]) != 0.75
    assert saved.latents.shape == (1, 16, 6, 8)  # unpacked, as the VAE makes them


def _resume_all(jobs: list[tuple[ModelInfo, GenerationParams, Path, Path]]) -> None:
    for model, params, out, _ckpt in jobs:
        outcome = ours(
            runner_for(model), params, out.parent, out.stem,
            on_step=lambda _p: StepDecision.CONTINUE,
        )  # fmt: skip
        assert outcome.resumed_from is not None and outcome.resumed_from.step == PAUSE_AT


def test_a_paused_and_a_crashed_flux_job_resume_in_a_fresh_process_to_the_same_image(
    models: dict[str, ModelInfo],
    runners: dict[str, Runner],
    tmp_path: Path,
    fresh_process: Callable[..., Any],
) -> None:
    jobs = []
    for kind in KINDS:  # paused at step k, both kinds
        params = flux_params(seed=7)
        out, ckpt = tmp_path / f"{kind}.png", tmp_path / f"{kind}.ckpt"
        paused = runners[kind].run(
            params, output_path=out, checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT)
        )
        assert paused.kind is OutcomeKind.PAUSED
        jobs.append((models[kind], params, out, ckpt))
    masked = flux_params(seed=9, **INPAINT)  # an inpaint, paused: its mask and image go along
    out, ckpt = tmp_path / "inpaint.png", tmp_path / "inpaint.ckpt"
    paused = ours(runners["dev"], masked, tmp_path, "inpaint", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    jobs.append((models["dev"], masked, out, ckpt))
    crashed = flux_params(seed=8, width=48, height=64)  # dev, a rolling checkpoint, a crash
    out, ckpt = tmp_path / "crashed.png", tmp_path / "crashed.ckpt"
    with pytest.raises(Crash):
        runners["dev"].run(
            crashed, output_path=out, checkpoint_path=ckpt, on_step=checkpoint_then_crash(PAUSE_AT)
        )
    assert ckpt.exists() and not out.exists()
    jobs.append((models["dev"], crashed, out, ckpt))
    fresh_process(_resume_all, jobs)  # spawned, as a worker after a crash
    for index, (model, params, out, ckpt) in enumerate(jobs):
        kind = "dev" if model is models["dev"] else "schnell"
        reference_run = ours(
            runners[kind], params, tmp_path, f"reference-{index}",
            on_step=lambda _p: StepDecision.CONTINUE,
        )  # fmt: skip
        assert reference_run.image_path is not None
        reference = pixels(reference_run.image_path)
        assert not ckpt.exists()
        assert max_diff(reference, pixels(out)) == 0, (kind, params.seed)


def test_flux_loras_equal_diffusers_load_lora_weights_and_leave_with_their_job(
    folders: dict[str, Path], models: dict[str, ModelInfo], tmp_path: Path
) -> None:
    lora = write_tiny_flux_lora(tmp_path / "lora" / "sketch.safetensors")
    model = models["dev"]
    runner = Runner(
        device=runner_for(model).device, resolve=lambda _n: model, threads=1,
        cache=PipelineCache(lora_folders=[lora.parent]),
    )  # fmt: skip
    plain = flux_params()
    with_lora = flux_params(prompt="the cat <lora:sketch:1>")
    ours = generate(runner, with_lora, tmp_path, "lora")
    assert max_diff(ours, stock(folders["dev"], with_lora, lora=lora)) == 0
    without = generate(runner, plain, tmp_path, "plain")  # the next job names no LoRA
    assert max_diff(without, stock(folders["dev"], plain)) == 0
    assert max_diff(ours, without) > 0
    # kohya's layout (fused q/k/v of the original model), converted by diffusers' loader
    kohya = write_tiny_flux_kohya_lora(lora.parent / "kohya-style.safetensors")
    with_kohya = flux_params(prompt="the cat <lora:kohya-style:1>")
    ours_kohya = generate(runner, with_kohya, tmp_path, "kohya")
    assert max_diff(ours_kohya, stock(folders["dev"], with_kohya, lora=kohya)) == 0
    assert max_diff(ours_kohya, without) > 0


def test_what_flux_cannot_take_is_refused_at_submit_in_one_sentence(
    folders: dict[str, Path],
) -> None:
    search = ModelSearchPath(user=(folders["dev"].parent,))
    name = folders["dev"].name
    check_runnable(flux_params(model=name), search)  # Euler, 16-px multiples, no negative
    refused = {
        "scheduler": ("DPM++ 2M", "run with the Euler sampler (flow matching), not 'DPM++ 2M'"),
        "width": (72, "multiples of 16 pixels, not 72x48"),
        "negative_prompt": ("blurry", "Flux.1 takes no negative prompt"),
    }
    for field, (value, message) in refused.items():
        with pytest.raises(InvalidParameters, match=re.escape(message)):
            check_runnable(flux_params(model=name, **{field: value}), search)


@pytest.mark.slow
def test_the_cli_generates_with_a_flux_folder(folders: dict[str, Path], tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / "flux-schnell").symlink_to(folders["schnell"], target_is_directory=True)
    result = subprocess.run(
        [sys.executable, "-m", "app", "--home", str(home), "generate", "a red circle",
         "--model", "flux-schnell", "--steps", "2", "--size", "32x32", "--seed", "3",
         "--negative", "", "--out", str(tmp_path / "out")],
        cwd=REPO, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    image = Path(result.stdout.strip().splitlines()[-1])
    assert image.is_file() and pixels(image).shape == (32, 32, 3)


def test_a_flux_job_shows_previews_and_runs_the_same_in_low_vram_mode(
    models: dict[str, ModelInfo], runners: dict[str, Runner], tmp_path: Path
) -> None:
    """Previews decode the (unpacked, shifted) latents; low-VRAM mode (on a CPU: VAE tiling
    above the tile size; model CPU offload needs a GPU) draws the same image."""
    params = flux_params()
    low_vram = Runner(
        device=replace(CPU, low_vram=True), resolve=lambda _n: models["dev"], threads=1,
        preview_interval_s=0,
    )  # fmt: skip
    previews: list[bytes] = []

    def watch(progress: StepProgress) -> StepDecision:
        png = progress.preview_png
        assert png is not None
        previews.append(png)
        return StepDecision.CONTINUE

    outcome = low_vram.run(
        params, output_path=tmp_path / "low.png", checkpoint_path=tmp_path / "low.ckpt",
        on_step=watch,
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.COMPLETED and len(previews) == STEPS
    assert Image.open(io.BytesIO(previews[-1])).size == (64, 48)
    assert low_vram.load("m").pipe.vae.use_tiling
    assert (
        max_diff(pixels(tmp_path / "low.png"), generate(runners["dev"], params, tmp_path, "n")) == 0
    )


@pytest.mark.parametrize(
    ("device", "capability", "expected"),
    [
        ("cuda", (8, 0), torch.bfloat16),  # Ampere and later: bfloat16, as Flux was released
        ("cuda:1", (9, 0), torch.bfloat16),
        ("cuda", (7, 5), torch.float16),  # Turing: no native bfloat16, the device's float16
        ("mps", None, torch.float16),
        ("cpu", None, torch.float32),  # a CPU stays float32
    ],
)
def test_flux_runs_in_bfloat16_on_gpus_that_compute_in_it(
    monkeypatch: pytest.MonkeyPatch, device: str, capability: Any, expected: torch.dtype
) -> None:
    """Only the choice is checked here (no GPU on the test machines): the device's
    capability as torch reports it decides."""
    from app.engine.generation.device import device_choice, transformer_dtype

    asked: list[int] = []

    def reported(index: int) -> Any:
        asked.append(index)
        return capability

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", reported)
    assert transformer_dtype(device_choice(device)) == expected
    assert asked == ([int(device.partition(":")[2] or 0)] if capability else [])


def test_a1111_weights_and_break_reach_flux_as_plain_words(
    folders: dict[str, Path], runners: dict[str, Runner], tmp_path: Path
) -> None:
    """T5 is not chunked the A1111 way and Flux uses no CLIP hidden states to weight: the
    syntax is dropped, the words kept; a prompt without syntax is passed as written."""
    assert sentence_prompt("(the cat:1.3) BREAK [sky] <lora:x:0.5>") == "the cat sky"
    assert sentence_prompt("the  cat, \\(sky\\)") == "the cat, (sky)"  # an escaped bracket is text
    assert sentence_prompt("the cat: 1.5, sky") == "the cat: 1.5, sky"  # no syntax: untouched
    weighted = flux_params(prompt="((the cat:1.3)) BREAK sky")
    ours = generate(runners["dev"], weighted, tmp_path, "weighted")
    assert max_diff(ours, stock(folders["dev"], flux_params(prompt="the cat sky"))) == 0
