"""SD 3.x through Easel's own loop: the stock StableDiffusion3Pipeline's image, exactly.

On a tiny random SD 3.5 (app.testing.tiny.sd3) saved as a diffusers folder, with and without T5:
the same image as `StableDiffusion3Pipeline` called as its users call it, a pause (or a
crash after a rolling checkpoint) resumed in a fresh process to the uninterrupted image,
a LoRA equal to diffusers' `load_lora_weights` and gone from the next job, A1111 prompt
weights on the CLIP encoders, the samplers it cannot run refused at submit, and a prompt
through the real `python -m app generate`.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.device import CPU
from app.engine.generation.families import family_of
from app.engine.generation.files.architecture import Architecture, Prediction
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from app.errors import BadInput
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.test_inpaint import MASK_DIGEST, mask_png
from tests.engine.generation.tiny_architectures import (
    Crash,
    checkpoint_then_crash,
    generate,
    go_on,
    max_diff,
    model_info,
    params_for,
    pause_at,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

REPO = Path(__file__).resolve().parents[3]
STEPS, PAUSE_AT = 4, 2
VARIANTS = ["3.5-large", "3-medium"]
FOLDERS = ["sd3", "sd3-no-t5", *VARIANTS]


@pytest.fixture(scope="module")
def models_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user models folder: a tiny SD 3.5 medium with T5, one without, one of each
    transformer shape (SD 3.5 large, SD 3 medium), and an SD3 LoRA."""
    from app.testing.tiny.sd3 import write_tiny_sd3, write_tiny_sd3_lora

    root = tmp_path_factory.mktemp("sd3-models")
    write_tiny_sd3(root / "sd3")
    write_tiny_sd3(root / "sd3-no-t5", with_t5=False)
    for variant in VARIANTS:
        write_tiny_sd3(root / variant, variant=variant)
    write_tiny_sd3_lora(root / "lora" / "sd3-style.safetensors")
    return root


@pytest.fixture(scope="module")
def models(models_root: Path) -> dict[str, ModelInfo]:
    return {name: model_info(models_root / name, "m") for name in FOLDERS}


def runner_with_loras(model: ModelInfo, models_root: Path) -> Runner:
    cache = PipelineCache(lora_folders=[models_root / "lora"])
    return Runner(device=CPU, resolve=lambda _n: model, cache=cache, threads=1)


@pytest.fixture(scope="module")
def runners(models: dict[str, ModelInfo], models_root: Path) -> dict[str, Runner]:
    return {name: runner_with_loras(model, models_root) for name, model in models.items()}


def sd3_params(**changes: Any) -> GenerationParams:
    return params_for("m", **{"steps": STEPS, **changes})


def stock_pipeline(folder: Path) -> Any:
    """As diffusers' users load it; without T5 as its docs say: `text_encoder_3=None`."""
    from diffusers import StableDiffusion3Pipeline

    without_t5 = {} if (folder / "text_encoder_3").is_dir() else {
        "text_encoder_3": None, "tokenizer_3": None,
    }  # fmt: skip
    pipe = StableDiffusion3Pipeline.from_pretrained(folder, local_files_only=True, **without_t5)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def stock(pipe: Any, params: GenerationParams, **extra: Any) -> np.ndarray:
    """The stock pipeline with its own scheduler (the flow-matching Euler of the model)."""
    image = pipe(
        params.prompt,
        negative_prompt=params.negative_prompt or None,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        width=params.width,
        height=params.height,
        generator=torch.Generator().manual_seed(params.seed),
        **extra,
    ).images[0]
    return pixels(image)


def test_a_tiny_sd3_folder_is_detected_as_sd35_with_flow_prediction(
    models: dict[str, ModelInfo],
) -> None:
    for model in models.values():
        assert model.architecture is Architecture.SD3 and model.prediction is Prediction.FLOW
        assert model.label == "SD 3.5, 64 px"


@pytest.mark.parametrize("folder", ["sd3", "sd3-no-t5"])
def test_easels_image_equals_the_stock_pipeline(
    runners: dict[str, Runner], models_root: Path, tmp_path: Path, folder: str
) -> None:
    """With a negative prompt, with none (the stock pipeline encodes ""), and at cfg 1
    (large turbo's way: no CFG, the transformer runs once per step)."""
    pipe = stock_pipeline(models_root / folder)
    cases: list[dict[str, Any]] = [
        {}, {"negative_prompt": ""}, {"cfg": 1.0, "steps": 2}, {"width": 96, "height": 64},
    ]  # fmt: skip
    for index, changes in enumerate(cases):
        params = sd3_params(**changes)
        ours = generate(runners[folder], params, tmp_path, f"ours-{index}")
        assert max_diff(ours, stock(pipe, params)) == 0, changes


@pytest.mark.parametrize("folder", VARIANTS)
def test_sd35_large_and_sd3_medium_equal_the_stock_pipeline(
    runners: dict[str, Runner], models_root: Path, tmp_path: Path, folder: str
) -> None:
    """The other transformer shapes (no dual attention; SD 3 medium without q/k norms),
    and large turbo's way of running (few steps, cfg 1: no CFG)."""
    pipe = stock_pipeline(models_root / folder)
    for index, params in enumerate([sd3_params(), sd3_params(cfg=1.0, steps=2)]):
        ours = generate(runners[folder], params, tmp_path, f"ours-{index}")
        assert max_diff(ours, stock(pipe, params)) == 0


def test_a_big_image_decodes_in_tiles_as_the_stock_pipeline_with_vae_tiling(
    runners: dict[str, Runner], models_root: Path, tmp_path: Path
) -> None:
    """Above twice the native side the runner tiles the VAE (as low-VRAM mode always does):
    the image of the stock pipeline after `pipe.vae.enable_tiling()`, its users' way."""
    params = sd3_params(width=192, height=160, steps=2)
    ours = generate(runners["sd3"], params, tmp_path, "big")
    pipe = stock_pipeline(models_root / "sd3")
    pipe.vae.enable_tiling()
    assert max_diff(ours, stock(pipe, params)) == 0
    pipe.vae.disable_tiling()
    assert max_diff(ours, stock(pipe, params)) > 0  # the tiles did make a difference


def test_a1111_weights_apply_to_the_clip_encoders(
    runners: dict[str, Runner], models_root: Path, tmp_path: Path
) -> None:
    """Weights of 1 in A1111's syntax take our own CLIP encoding: the stock image still;
    another weight changes it. T5 reads the plain words either way."""
    runner, pipe = runners["sd3"], stock_pipeline(models_root / "sd3")
    at_one = generate(runner, sd3_params(prompt="(the cat:1.0)"), tmp_path, "one")
    assert max_diff(at_one, stock(pipe, sd3_params())) == 0
    weighted = generate(runner, sd3_params(prompt="(the:1.4) cat"), tmp_path, "weighted")
    assert max_diff(weighted, at_one) > 0


def test_a_checkpoint_carries_the_prompt_embeddings_and_the_step_index(
    runners: dict[str, Runner], tmp_path: Path
) -> None:
    ckpt = tmp_path / "job.ckpt"
    paused = runners["sd3"].run(
        sd3_params(), output_path=tmp_path / "job.png", checkpoint_path=ckpt,
        on_step=pause_at(PAUSE_AT),
    )  # fmt: skip
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(ckpt).checkpoint
    assert saved.family == "sd3" == family_of(runners["sd3"].load("m").pipe).name
    assert set(saved.conditioning) == {"prompt_embeds", "pooled_embeds"}
    assert saved.conditioning["prompt_embeds"].shape[0] == 2  # [negative, prompt]: true CFG
    assert saved.scheduler_class == "FlowMatchEulerDiscreteScheduler"
    assert saved.scheduler_state["step_index"] == PAUSE_AT


Job = tuple[ModelInfo, GenerationParams, Path, Path, bytes | None]


def _mask_of(params: GenerationParams) -> bytes | None:
    return mask_png() if params.mask else None


def _resume_in_child(jobs: list[Job]) -> None:
    for model, params, out, ckpt, image in jobs:
        outcome = runner_for(model).run(
            params, RunInputs(init_image=image, mask=_mask_of(params)), output_path=out,
            checkpoint_path=ckpt, on_step=go_on,
        )  # fmt: skip
        assert outcome.kind is OutcomeKind.COMPLETED and outcome.resumed_from is not None


def test_a_pause_and_a_crash_resume_in_a_fresh_process_to_the_same_image(
    models: dict[str, ModelInfo],
    runners: dict[str, Runner],
    tmp_path: Path,
    fresh_process: Callable[..., Any],
) -> None:
    """Paused at step 2 (with T5, without, img2img, inpaint), and a crash after a rolling
    checkpoint: a new process (a worker after a restart) finishes each to the image of an
    uninterrupted run."""
    img2img = sd3_params(init_image="job:1", strength=0.6, steps=5)
    inpaint = inpaint_params(strength=0.8)
    cases = [("sd3", sd3_params(), None), ("sd3-no-t5", sd3_params(), None),
             ("sd3", img2img, init_png()), ("sd3", inpaint, init_png())]  # fmt: skip
    jobs = []
    for index, (name, params, image) in enumerate(cases):
        out, ckpt = tmp_path / f"job-{index}.png", tmp_path / f"job-{index}.ckpt"
        paused = runners[name].run(
            params, RunInputs(init_image=image, mask=_mask_of(params)), output_path=out,
            checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT),
        )  # fmt: skip
        assert paused.kind is OutcomeKind.PAUSED
        jobs.append((models[name], params, out, ckpt, image))
    crashed = tmp_path / "crashed.png", tmp_path / "crashed.ckpt"
    with pytest.raises(Crash):
        runners["sd3"].run(
            sd3_params(seed=99), output_path=crashed[0], checkpoint_path=crashed[1],
            on_step=checkpoint_then_crash(PAUSE_AT),
        )  # fmt: skip
    assert crashed[1].exists()
    jobs.append((models["sd3"], sd3_params(seed=99), *crashed, None))
    fresh_process(_resume_in_child, jobs)  # spawned, as a worker after a crash
    names = [name for name, _, _ in cases] + ["sd3"]
    for index, (name, (_, params, out, ckpt, image)) in enumerate(zip(names, jobs, strict=True)):
        done = runners[name].run(
            params, RunInputs(init_image=image, mask=_mask_of(params)),
            output_path=tmp_path / f"reference-{index}.png",
            checkpoint_path=tmp_path / f"reference-{index}.ckpt", on_step=go_on,
        )  # fmt: skip
        assert done.image_path is not None and not ckpt.exists()
        assert max_diff(pixels(done.image_path), pixels(out)) == 0, (name, params)


def test_img2img_equals_the_stock_img2img_pipeline(
    runners: dict[str, Runner], models_root: Path, tmp_path: Path
) -> None:
    """StableDiffusion3Img2ImgPipeline skips int(steps - steps * strength) steps: 5 steps at
    0.6 run 3 (SD 1.x's pipeline would run int(5 * 0.6) = 3 too, 4 steps at 0.6 run 3 here)."""
    from diffusers import StableDiffusion3Img2ImgPipeline

    pipe: Any = StableDiffusion3Img2ImgPipeline(**stock_pipeline(models_root / "sd3").components)
    pipe.set_progress_bar_config(disable=True)
    seen: list[int] = []

    def count(progress: StepProgress) -> StepDecision:
        seen.append(progress.total)
        return StepDecision.CONTINUE

    for strength, steps in ((0.6, 4), (0.6, 5), (1.0, 3)):
        params = sd3_params(init_image="job:1", strength=strength, steps=steps)
        seen.clear()
        out = tmp_path / f"ours-{steps}-{strength}.png"
        runners["sd3"].run(
            params, RunInputs(init_image=init_png()), output_path=out,
            checkpoint_path=tmp_path / "x.ckpt", on_step=count,
        )  # fmt: skip
        expected_steps = steps - int(max(steps - steps * strength, 0))
        assert seen == [expected_steps] * expected_steps
        image = Image.open(io.BytesIO(init_png()))
        reference = pipe(
            params.prompt, image=image, strength=strength, negative_prompt=params.negative_prompt,
            num_inference_steps=steps, guidance_scale=params.cfg,
            generator=torch.Generator().manual_seed(params.seed),
        ).images[0]  # fmt: skip
        assert max_diff(pixels(out), pixels(reference)) == 0, (strength, steps)


def inpaint_params(**changes: Any) -> GenerationParams:
    base = {"init_image": "job:1", "mask": MASK_DIGEST, "strength": 1.0, "mask_blur": 4}
    return sd3_params(**{**base, **changes})


@pytest.mark.parametrize(
    "changes", [{}, {"strength": 0.7, "steps": 5}, {"only_masked": True, "mask_padding": 8}]
)
def test_inpaint_equals_the_stock_inpaint_pipelines_latents(
    runners: dict[str, Runner], models_root: Path, tmp_path: Path, changes: dict[str, Any]
) -> None:
    """The final latents equal StableDiffusion3InpaintPipeline's exactly; the pixels equal
    those latents decoded as every other SD3 pipeline decodes (with the VAE's shift factor,
    which diffusers 0.42's inpaint pipeline leaves out: #13611), so the stock pixels differ."""
    from diffusers import StableDiffusion3InpaintPipeline

    from app.engine.generation import denoise

    runner, params = runners["sd3"], inpaint_params(**changes)
    picture, mask = (init_png((96, 80)), mask_png((96, 80), (50, 20, 80, 50)))
    if not params.only_masked:
        picture, mask = init_png(), mask_png()
    out = runner.run(
        params, RunInputs(init_image=picture, mask=mask), output_path=tmp_path / "ours.png",
        checkpoint_path=tmp_path / "ours.ckpt", on_step=go_on,
    )  # fmt: skip
    assert out.image_path is not None
    loaded = runner.load("m").pipe
    state = denoise.start(loaded, params, picture, mask)
    while not state.finished:
        denoise.advance(loaded, state)
    pipe: Any = StableDiffusion3InpaintPipeline(**stock_pipeline(models_root / "sd3").components)
    pipe.set_progress_bar_config(disable=True)
    mask_image = pipe.mask_processor.blur(Image.open(io.BytesIO(mask)), blur_factor=4)
    crop = {"padding_mask_crop": params.mask_padding} if params.only_masked else {}
    call = {
        "image": Image.open(io.BytesIO(picture)), "mask_image": mask_image,
        "strength": params.strength, "negative_prompt": params.negative_prompt,
        "num_inference_steps": params.steps, "guidance_scale": params.cfg,
        "width": params.width, "height": params.height, **crop,
    }  # fmt: skip
    kept: dict[str, torch.Tensor] = {}

    def keep_latents(_pipe: Any, _i: int, _t: Any, tensors: dict[str, Any]) -> dict[str, Any]:
        kept["latents"] = tensors["latents"]  # after the step's blend: the final ones last
        return {}

    stock_image = pipe(
        params.prompt, generator=torch.Generator().manual_seed(params.seed),
        callback_on_step_end=keep_latents, **call,
    ).images[0]  # fmt: skip
    assert torch.equal(state.latents, kept["latents"])
    vae = pipe.vae
    latents = kept["latents"] / vae.config.scaling_factor + vae.config.shift_factor
    image = pipe.image_processor.postprocess(vae.decode(latents)[0].detach())[0]
    if params.only_masked:
        crop_box = pipe.mask_processor.get_crop_region(mask_image, 64, 64, pad=8)
        original = Image.open(io.BytesIO(picture))
        image = pipe.image_processor.apply_overlay(mask_image, original, image, crop_box)
    assert max_diff(pixels(out.image_path), pixels(image)) == 0
    assert max_diff(pixels(out.image_path), pixels(stock_image)) > 0  # the stock decode's tint


def test_a_lora_at_weight_one_equals_diffusers_and_is_gone_from_the_next_job(
    runners: dict[str, Runner], models_root: Path, tmp_path: Path
) -> None:
    runner = runners["sd3"]
    plain = generate(runner, sd3_params(), tmp_path, "plain")
    ours = generate(runner, sd3_params(prompt="the cat <lora:sd3-style:1>"), tmp_path, "lora")
    assert max_diff(ours, plain) > 0  # the LoRA does change the picture
    pipe = stock_pipeline(models_root / "sd3")
    pipe.load_lora_weights(str(models_root / "lora" / "sd3-style.safetensors"))
    assert max_diff(ours, stock(pipe, sd3_params())) == 0
    after = generate(runner, sd3_params(), tmp_path, "after")
    assert max_diff(after, plain) == 0  # unloaded: the next job gets the plain model


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"scheduler": "DPM++ 2M"}, r"SD 3.5 models run with the Euler sampler \(flow matching\)"),
        ({"width": 72}, "SD 3.5 draws sizes in multiples of 16 pixels, not 72x64"),
    ],
)
def test_what_sd3_cannot_run_is_refused_at_submit_in_one_sentence(
    models_root: Path, changes: dict[str, Any], message: str
) -> None:
    search = ModelSearchPath(user=(models_root,))
    assert check_runnable(params_for("sd3", steps=STEPS), search).architecture is Architecture.SD3
    with pytest.raises(BadInput, match=message):
        check_runnable(params_for("sd3", steps=STEPS, **changes), search)


@pytest.mark.slow
def test_a_prompt_through_the_cli_makes_an_image(
    models_root: Path, easel_home: Path, tmp_path: Path
) -> None:
    from tests.engine.workers.worker_fixtures import link_model

    link_model(models_root / "sd3", easel_home)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "app", "generate", "a red circle", "--model", "sd3",
         "--steps", "3", "--size", "64x64", "--seed", "3", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    image = Path(result.stdout.strip().splitlines()[-1])
    assert image.parent == out and Image.open(image).size == (64, 64)
