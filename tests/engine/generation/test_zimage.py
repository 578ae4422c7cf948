"""Z-Image through Easel's own loop: the stock ZImagePipeline's image, exactly.

On a tiny random Z-Image (tiny.zimage: a Qwen3 text encoder with a chat-template tokenizer,
the single-stream DiT, Flux's VAE) saved as a diffusers folder: the same image as
`ZImagePipeline` called as its users call it (with a negative prompt, without, and at
Turbo's guidance 0), img2img equal to `ZImageImg2ImgPipeline`, inpaint (the whole image and
"only masked") equal to `ZImageInpaintPipeline`, a pause (or a crash after a rolling
checkpoint) resumed in a fresh process to the uninterrupted image, inpaints included, and
what it cannot run refused at submit in one sentence.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.device import DeviceChoice
from app.engine.generation.families import family_of
from app.engine.generation.files.architecture import Architecture, Prediction, detect_folder
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind
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

STEPS, PAUSE_AT = 4, 2


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.zimage import write_tiny_zimage

    return write_tiny_zimage(tmp_path_factory.mktemp("zimage-models") / "zimage")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder, "m")


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


@pytest.fixture(scope="module")
def stock_pipe(folder: Path) -> Any:
    from diffusers import ZImagePipeline

    pipe = ZImagePipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def zimage_params(**changes: Any) -> GenerationParams:
    return params_for("m", **{"steps": STEPS, "cfg": 5.0, **changes})


def stock(pipe: Any, params: GenerationParams) -> np.ndarray:
    """As its model card calls it (the pipeline's own scheduler, its defaults otherwise)."""
    image = pipe(
        prompt=params.prompt,
        negative_prompt=params.negative_prompt or None,
        height=params.height,
        width=params.width,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]
    return pixels(image)


def test_a_tiny_zimage_folder_is_detected_as_zimage_with_flow_prediction(
    model: ModelInfo,
) -> None:
    assert model.architecture is Architecture.ZIMAGE and model.prediction is Prediction.FLOW
    assert model.label.startswith("Z-Image")


def test_a_zimage_folder_without_its_text_encoder_names_the_missing_part(
    folder: Path, tmp_path: Path
) -> None:
    """Detection from model_index.json alone: a folder saved without the Qwen3 encoder."""
    broken = tmp_path / "no-encoder"
    shutil.copytree(folder, broken, ignore=shutil.ignore_patterns("text_encoder"))
    index = json.loads((broken / "model_index.json").read_text())
    (broken / "model_index.json").write_text(json.dumps({**index, "text_encoder": [None, None]}))
    detected = detect_folder(broken)
    assert not detected.supported
    assert detected.unsupported_reason == "the Z-Image pipeline has no text_encoder"


def test_easels_image_equals_the_stock_pipeline(
    runner: Runner, stock_pipe: Any, tmp_path: Path
) -> None:
    """With a negative prompt, with none (the stock pipeline encodes ""), at Turbo's
    guidance 0 (no CFG: one transformer call per step) and at a non-square size."""
    cases: list[dict[str, Any]] = [
        {}, {"negative_prompt": ""}, {"cfg": 0.0, "steps": 3}, {"width": 96, "height": 64},
    ]  # fmt: skip
    images = []
    for index, changes in enumerate(cases):
        params = zimage_params(**changes)
        ours = generate(runner, params, tmp_path, f"ours-{index}")
        assert max_diff(ours, stock(stock_pipe, params)) == 0, changes
        images.append(ours)
    assert max_diff(images[0], images[1]) > 0  # the negative prompt does reach the model


def test_img2img_equals_the_stock_img2img_pipeline(
    runner: Runner, stock_pipe: Any, tmp_path: Path
) -> None:
    """ZImageImg2ImgPipeline skips int(steps - steps * strength) steps, as the other flow
    img2img pipelines: 4 steps at 0.6 run 3."""
    from diffusers import ZImageImg2ImgPipeline

    pipe: Any = ZImageImg2ImgPipeline(**stock_pipe.components)
    pipe.set_progress_bar_config(disable=True)
    for strength, steps in ((0.6, 4), (1.0, 2)):
        params = zimage_params(init_image="job:1", strength=strength, steps=steps)
        out = tmp_path / f"ours-{steps}-{strength}.png"
        runner.run(
            params, RunInputs(init_image=init_png()), output_path=out,
            checkpoint_path=tmp_path / "x.ckpt", on_step=go_on,
        )  # fmt: skip
        reference = pipe(
            prompt=params.prompt, image=Image.open(io.BytesIO(init_png())), strength=strength,
            negative_prompt=params.negative_prompt, height=params.height, width=params.width,
            num_inference_steps=steps, guidance_scale=params.cfg,
            generator=torch.Generator().manual_seed(params.seed),
        ).images[0]  # fmt: skip
        assert max_diff(pixels(out), pixels(reference)) == 0, (strength, steps)


SIZE, MASK_BOX = (64, 48), (16, 8, 48, 40)  # the picture (w, h) and the box to repaint
INPAINT: dict[str, Any] = {"init_image": "job:1", "mask": MASK_DIGEST, "width": 64, "height": 48}


def inpaint_run(
    runner: Runner, params: GenerationParams, folder: Path, name: str, **kw: Any
) -> Any:
    """Easel's inpaint of the test picture, its box repainted."""
    return runner.run(
        params, RunInputs(init_image=init_png(SIZE), mask=mask_png(SIZE, MASK_BOX)),
        output_path=folder / f"{name}.png", checkpoint_path=folder / f"{name}.ckpt",
        **{"on_step": go_on, **kw},
    )  # fmt: skip


def stock_inpaint(stock_pipe: Any, params: GenerationParams) -> np.ndarray:
    """`ZImageInpaintPipeline` as its users call it: the mask blurred first (as the inpaint
    pipelines' documentation shows), its defaults otherwise. It has no `padding_mask_crop`,
    so "only masked" is done around it as the other inpaint pipelines do it inside: the
    crop region of the blurred mask, the box cut out of picture and mask and resized to the
    job's size ("fill"), the pipeline run on those, its image pasted back through the mask."""
    from diffusers import ZImageInpaintPipeline

    pipe: Any = ZImageInpaintPipeline(**stock_pipe.components)
    pipe.set_progress_bar_config(disable=True)
    image = Image.open(io.BytesIO(init_png(SIZE))).convert("RGB")
    mask = pipe.mask_processor.blur(
        Image.open(io.BytesIO(mask_png(SIZE, MASK_BOX))), params.mask_blur
    )
    size = {"height": params.height, "width": params.width}
    crop = None
    inputs = {"image": image, "mask_image": mask}
    if params.only_masked:
        crop = pipe.mask_processor.get_crop_region(mask, **size, pad=params.mask_padding)
        inputs = {
            "image": pipe.image_processor.resize(image.crop(crop), **size, resize_mode="fill"),
            "mask_image": pipe.mask_processor.resize(mask.crop(crop), **size, resize_mode="fill"),
        }
    out = pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt or None, **inputs,
        strength=params.strength, **size, num_inference_steps=params.steps,
        guidance_scale=params.cfg, generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    if crop is not None:
        out = pipe.image_processor.apply_overlay(mask, image, out, crop)
    return pixels(out)


def test_inpaint_equals_the_stock_inpaint_pipeline(
    runner: Runner, stock_pipe: Any, tmp_path: Path
) -> None:
    """The whole image at the stock strength of 1.0 with CFG, at Turbo's guidance 0 and
    strength 0.6 (4 steps run 3), and "only masked": a 32x32 box around the mask generated
    and pasted back, the picture outside the box untouched."""
    cases: list[dict[str, Any]] = [
        {"strength": 1.0},
        {"strength": 0.6, "cfg": 0.0, "mask_blur": 0},
        {"strength": 0.9, "only_masked": True, "mask_padding": 8, "width": 32, "height": 32},
    ]
    for index, changes in enumerate(cases):
        params = zimage_params(**{**INPAINT, **changes})
        outcome = inpaint_run(runner, params, tmp_path, f"ours-{index}")
        assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
        ours = pixels(outcome.image_path)
        assert ours.shape == (48, 64, 3)
        assert max_diff(ours, stock_inpaint(stock_pipe, params)) == 0, changes
        picture = pixels(Image.open(io.BytesIO(init_png(SIZE))))
        assert max_diff(ours[:, :4], picture[:, :4]) <= (0 if params.only_masked else 255)
        assert max_diff(ours[16:32, 24:40], picture[16:32, 24:40]) > 0  # the box is repainted


def test_a_checkpoint_carries_both_prompts_hidden_states_and_the_step_index(
    runner: Runner, tmp_path: Path
) -> None:
    ckpt = tmp_path / "job.ckpt"
    paused = runner.run(
        zimage_params(), output_path=tmp_path / "job.png", checkpoint_path=ckpt,
        on_step=pause_at(PAUSE_AT),
    )  # fmt: skip
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(ckpt).checkpoint
    assert saved.family == "zimage" == family_of(runner.load("m").pipe).name
    assert set(saved.conditioning) == {"prompt_embeds", "negative_embeds"}
    assert saved.latents.dtype == torch.float32
    assert saved.scheduler_class == "FlowMatchEulerDiscreteScheduler"
    assert saved.scheduler_state["step_index"] == PAUSE_AT


Job = tuple[ModelInfo, GenerationParams, Path, Path, bytes | None]


def _resume_in_child(jobs: list[Job]) -> None:
    for model, params, out, ckpt, image in jobs:
        outcome = runner_for(model).run(
            params, RunInputs(init_image=image), output_path=out, checkpoint_path=ckpt,
            on_step=go_on,
        )  # fmt: skip
        assert outcome.kind is OutcomeKind.COMPLETED and outcome.resumed_from is not None


def test_a_pause_and_a_crash_resume_in_a_fresh_process_to_the_same_image(
    model: ModelInfo, runner: Runner, tmp_path: Path, fresh_process: Callable[..., Any]
) -> None:
    """Paused at step 2 (CFG, Turbo's guidance 0, img2img), and a crash after a rolling
    checkpoint: a new process (a worker after a restart) finishes each to the image of an
    uninterrupted run."""
    cases = [
        (zimage_params(), None),
        (zimage_params(cfg=0.0), None),
        (zimage_params(init_image="job:1", strength=0.8, steps=5), init_png()),
    ]
    jobs: list[Job] = []
    for index, (params, image) in enumerate(cases):
        out, ckpt = tmp_path / f"job-{index}.png", tmp_path / f"job-{index}.ckpt"
        paused = runner.run(
            params, RunInputs(init_image=image), output_path=out, checkpoint_path=ckpt,
            on_step=pause_at(PAUSE_AT),
        )  # fmt: skip
        assert paused.kind is OutcomeKind.PAUSED
        jobs.append((model, params, out, ckpt, image))
    crashed = tmp_path / "crashed.png", tmp_path / "crashed.ckpt"
    with pytest.raises(Crash):
        runner.run(
            zimage_params(seed=99), output_path=crashed[0], checkpoint_path=crashed[1],
            on_step=checkpoint_then_crash(PAUSE_AT),
        )  # fmt: skip
    assert crashed[1].exists()
    jobs.append((model, zimage_params(seed=99), *crashed, None))
    fresh_process(_resume_in_child, jobs)  # spawned, as a worker after a crash
    for index, (_, params, out, ckpt, image) in enumerate(jobs):
        done = runner.run(
            params, RunInputs(init_image=image), output_path=tmp_path / f"reference-{index}.png",
            checkpoint_path=tmp_path / f"reference-{index}.ckpt", on_step=go_on,
        )  # fmt: skip
        assert done.image_path is not None and not ckpt.exists()
        assert max_diff(pixels(done.image_path), pixels(out)) == 0, params


def _resume_inpaints_in_child(jobs: list[tuple[ModelInfo, GenerationParams, Path]]) -> None:
    for model, params, out in jobs:
        outcome = inpaint_run(runner_for(model), params, out.parent, out.stem)
        assert outcome.kind is OutcomeKind.COMPLETED and outcome.resumed_from is not None


def test_a_paused_and_a_crashed_inpaint_resume_in_a_fresh_process_to_the_same_image(
    model: ModelInfo, runner: Runner, tmp_path: Path, fresh_process: Callable[..., Any]
) -> None:
    """An inpaint paused at step 2 (CFG, the whole image; Turbo's guidance 0, only masked)
    and one crashed after a rolling checkpoint: the checkpoint carries the mask, the image
    latents and the blending noise, and a new process finishes each to the image of an
    uninterrupted run."""
    paused_cases = [
        zimage_params(**INPAINT, strength=0.9, steps=5),
        zimage_params(**{**INPAINT, "cfg": 0.0, "only_masked": True, "width": 32, "height": 32}),
    ]
    jobs = []
    for index, params in enumerate(paused_cases):
        paused = inpaint_run(runner, params, tmp_path, f"job-{index}", on_step=pause_at(PAUSE_AT))
        assert paused.kind is OutcomeKind.PAUSED
        saved = load_checkpoint(tmp_path / f"job-{index}.ckpt").checkpoint
        assert {"inpaint_mask", "inpaint_image_latents", "inpaint_noise"} <= set(saved.conditioning)
        jobs.append((model, params, tmp_path / f"job-{index}.png"))
    crashed = zimage_params(**INPAINT, seed=99, only_masked=True, mask_padding=4)
    with pytest.raises(Crash):
        inpaint_run(runner, crashed, tmp_path, "crashed", on_step=checkpoint_then_crash(PAUSE_AT))
    assert (tmp_path / "crashed.ckpt").exists()
    jobs.append((model, crashed, tmp_path / "crashed.png"))
    fresh_process(_resume_inpaints_in_child, jobs)  # spawned, as a worker after a crash
    for index, (_, params, out) in enumerate(jobs):
        done = inpaint_run(runner, params, tmp_path, f"reference-{index}")
        assert done.image_path is not None and not out.with_suffix(".ckpt").exists()
        assert max_diff(pixels(done.image_path), pixels(out)) == 0, params


def test_in_bfloat16_an_inpaint_equals_the_stock_pipeline_and_resumes_exactly(
    folder: Path, model: ModelInfo, tmp_path: Path
) -> None:
    """bfloat16 arithmetic as on a GPU, run here on the CPU: the stock loop blends in the
    prompt embeddings' dtype, and a checkpoint restores the blending tensors in float32,
    which must be cast back for the resumed steps to blend as the uninterrupted ones."""
    from diffusers import ZImagePipeline

    bf16 = DeviceChoice("cpu", "bfloat16")
    params = zimage_params(**INPAINT, strength=0.9, steps=5)
    runner = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    done = inpaint_run(runner, params, tmp_path, "ours")
    assert runner.load("m").pipe.transformer.dtype == torch.bfloat16
    assert done.image_path is not None
    image = pixels(done.image_path)
    pipe = ZImagePipeline.from_pretrained(folder, dtype=torch.bfloat16, local_files_only=True)
    assert max_diff(image, stock_inpaint(pipe, params)) == 0
    paused = inpaint_run(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    fresh = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    resumed = inpaint_run(fresh, params, tmp_path, "job")
    assert resumed.resumed_from is not None
    assert max_diff(pixels(tmp_path / "job.png"), image) == 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"scheduler": "DPM++ 2M"}, r"Z-Image models run with the Euler sampler \(flow matching\)"),
        ({"width": 72}, "Z-Image draws sizes in multiples of 16 pixels, not 72x64"),
    ],
)
def test_what_zimage_cannot_run_is_refused_at_submit_in_one_sentence(
    folder: Path, changes: dict[str, Any], message: str
) -> None:
    search = ModelSearchPath(user=(folder.parent,))
    base = params_for("zimage", steps=STEPS)
    assert check_runnable(base, search).architecture is Architecture.ZIMAGE
    with pytest.raises(BadInput, match=message):
        check_runnable(params_for("zimage", steps=STEPS, **changes), search)


def test_a_zimage_inpaint_is_accepted_at_submit(folder: Path) -> None:
    """Inpaint, the whole image or only masked, runs on Z-Image (it was refused before)."""
    search = ModelSearchPath(user=(folder.parent,))
    for only_masked in (False, True):
        params = params_for("zimage", steps=STEPS, only_masked=only_masked, **INPAINT)
        assert check_runnable(params, search).architecture is Architecture.ZIMAGE
