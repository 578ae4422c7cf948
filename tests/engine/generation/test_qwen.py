"""Qwen-Image through Easel's own loop: the stock QwenImagePipeline's image, exactly.

On a tiny random Qwen-Image (tiny.qwen: a Qwen2.5-VL text encoder with a byte-level
tokenizer, the MMDiT, the causal 3D VAE) saved as a diffusers folder: the same image as
`QwenImagePipeline` called with its defaults but for what the job sets (true CFG with a
negative prompt, with an empty one, without CFG at 1, a non-square size), img2img equal to
`QwenImageImg2ImgPipeline`, inpaint (the whole image and "only masked") equal to
`QwenImageInpaintPipeline`, in float32 and in bfloat16; a pause (or a crash after a rolling
checkpoint) resumed in a fresh process to the uninterrupted image; what it cannot run
refused at submit in one sentence.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.device import CPU, DeviceChoice
from app.engine.generation.families import family_of
from app.engine.generation.files.architecture import Architecture, Prediction, detect_folder
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from app.errors import BadInput
from app.testing.tiny.qwen import write_tiny_qwen_lora
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.test_inpaint import MASK_DIGEST, mask_png
from tests.engine.generation.tiny_architectures import (
    Crash,
    checkpoint_then_crash,
    go_on,
    max_diff,
    model_info,
    params_for,
    pause_at,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT = 3, 1
SIZE, MASK_BOX = (64, 48), (16, 8, 48, 40)  # the picture (w, h) and the box to repaint
IMG2IMG: dict[str, Any] = {"init_image": "job:1", "strength": 0.8, "steps": 4}  # 4 at 0.8 run 3
INPAINT: dict[str, Any] = {
    "init_image": "job:1", "mask": MASK_DIGEST, "width": 64, "height": 48, "strength": 0.9,
}  # fmt: skip


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.qwen import write_tiny_qwen

    return write_tiny_qwen(tmp_path_factory.mktemp("qwen-models") / "qwen")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder, "m")


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


@pytest.fixture(scope="module")
def stock_pipe(folder: Path) -> Any:
    from diffusers import QwenImagePipeline

    pipe = QwenImagePipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def qwen_params(**changes: Any) -> GenerationParams:
    return params_for("m", **{"steps": STEPS, "cfg": 4.0, **changes})


def inputs_of(params: GenerationParams) -> RunInputs:
    """The picture (and for an inpaint the mask) a job of `params` is handed."""
    if params.mask:
        return RunInputs(init_image=init_png(SIZE), mask=mask_png(SIZE, MASK_BOX))
    return RunInputs(init_image=init_png() if params.init_image else None)


def run(runner: Runner, params: GenerationParams, folder: Path, name: str, **kw: Any) -> Any:
    return runner.run(
        params, inputs_of(params), output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt", **{"on_step": go_on, **kw},
    )  # fmt: skip


def ours(runner: Runner, params: GenerationParams, folder: Path, name: str) -> np.ndarray:
    outcome = run(runner, params, folder, name)
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


def stock(pipe: Any, params: GenerationParams) -> np.ndarray:
    """The stock pipeline of the job's kind (sharing `pipe`'s components) as its model card
    calls it: `true_cfg_scale` and a negative prompt, its defaults otherwise; an inpaint's
    mask blurred first (as the inpaint pipelines' documentation shows), "only masked" its
    `padding_mask_crop`."""
    from diffusers import QwenImageImg2ImgPipeline, QwenImageInpaintPipeline

    call: dict[str, Any] = {
        "prompt": params.prompt, "negative_prompt": params.negative_prompt,
        "true_cfg_scale": params.cfg, "height": params.height, "width": params.width,
        "num_inference_steps": params.steps,
        "generator": torch.Generator().manual_seed(params.seed),
    }  # fmt: skip
    if params.mask:
        pipe = QwenImageInpaintPipeline(**pipe.components)
        mask = Image.open(io.BytesIO(mask_png(SIZE, MASK_BOX)))
        call["image"] = Image.open(io.BytesIO(init_png(SIZE))).convert("RGB")
        call["mask_image"] = pipe.mask_processor.blur(mask, params.mask_blur)
        call["strength"] = params.strength
        if params.only_masked:
            call["padding_mask_crop"] = params.mask_padding
    elif params.init_image:
        pipe = QwenImageImg2ImgPipeline(**pipe.components)
        call["image"] = Image.open(io.BytesIO(init_png()))
        call["strength"] = params.strength
    pipe.set_progress_bar_config(disable=True)
    return pixels(pipe(**call).images[0])


def test_a_tiny_qwen_image_folder_is_detected_with_flow_prediction(model: ModelInfo) -> None:
    assert model.architecture is Architecture.QWEN_IMAGE and model.prediction is Prediction.FLOW
    assert model.label.startswith("Qwen-Image")


def test_a_qwen_image_folder_without_its_text_encoder_names_the_missing_part(
    folder: Path, tmp_path: Path
) -> None:
    """Detection from model_index.json alone: a folder saved without Qwen2.5-VL."""
    broken = tmp_path / "no-encoder"
    shutil.copytree(folder, broken, ignore=shutil.ignore_patterns("text_encoder"))
    index = json.loads((broken / "model_index.json").read_text())
    (broken / "model_index.json").write_text(json.dumps({**index, "text_encoder": [None, None]}))
    detected = detect_folder(broken)
    assert not detected.supported
    assert detected.unsupported_reason == "the Qwen-Image pipeline has no text_encoder"


TXT2IMG_CASES: list[dict[str, Any]] = [
    {}, {"negative_prompt": ""}, {"cfg": 1.0}, {"width": 96, "height": 64},
]  # fmt: skip


def test_easels_image_equals_the_stock_pipeline(
    runner: Runner, stock_pipe: Any, tmp_path: Path
) -> None:
    """True CFG with a negative prompt, with an empty one (the empty text, as the stock
    pipeline given ""), without CFG at 1 (one transformer call per step), non-square."""
    images = []
    for index, changes in enumerate(TXT2IMG_CASES):
        params = qwen_params(**changes)
        image = ours(runner, params, tmp_path, f"ours-{index}")
        assert max_diff(image, stock(stock_pipe, params)) == 0, changes
        images.append(image)
    assert max_diff(images[0], images[1]) > 0  # the negative prompt does reach the model
    assert max_diff(images[0], images[2]) > 0  # and CFG does guide


@pytest.mark.parametrize(
    "changes",
    [
        IMG2IMG,
        {**IMG2IMG, "strength": 1.0, "cfg": 1.0, "steps": 2},
        INPAINT,
        {**INPAINT, "only_masked": True, "mask_padding": 8, "width": 32, "height": 32},
    ],
    ids=["img2img", "img2img-no-cfg", "inpaint", "inpaint-only-masked"],
)
def test_img2img_and_inpaint_equal_their_stock_pipelines(
    runner: Runner, stock_pipe: Any, tmp_path: Path, changes: dict[str, Any]
) -> None:
    """img2img skips int(steps - steps * strength) steps as the other flow pipelines;
    inpaint keeps the area outside the mask (only masked: the picture outside the box is
    untouched) and repaints the box."""
    params = qwen_params(**changes)
    image = ours(runner, params, tmp_path, "ours")
    assert max_diff(image, stock(stock_pipe, params)) == 0
    if params.mask:
        picture = pixels(Image.open(io.BytesIO(init_png(SIZE))))
        assert image.shape == picture.shape
        assert max_diff(image[:, :4], picture[:, :4]) <= (0 if params.only_masked else 255)
        assert max_diff(image[16:32, 24:40], picture[16:32, 24:40]) > 0


def test_a_checkpoint_carries_both_prompts_hidden_states_and_the_step_index(
    runner: Runner, tmp_path: Path
) -> None:
    paused = run(runner, qwen_params(), tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(tmp_path / "job.ckpt").checkpoint
    assert saved.family == "qwen-image" == family_of(runner.load("m").pipe).name
    assert set(saved.conditioning) == {"prompt_embeds", "negative_embeds"}
    assert saved.latents.shape == (1, 16, 8, 8)  # unpacked, without the VAE's frame axis
    assert saved.scheduler_class == "FlowMatchEulerDiscreteScheduler"
    assert saved.scheduler_state["step_index"] == PAUSE_AT


def test_a_qwen_image_job_shows_previews_and_runs_the_same_in_low_vram_mode(
    model: ModelInfo, runner: Runner, tmp_path: Path
) -> None:
    """Each step's preview is the latents decoded as the family decodes them (a tiny VAE);
    a real VAE's grey linear map takes the same (1, 16, h, w) latents. Low-VRAM mode (on a
    CPU: the VAE tiled above its tile size; model CPU offload needs a GPU) draws the same."""
    from app.engine.generation.families.qwen.model import QwenImagePreviewer

    watched = Runner(
        device=replace(CPU, low_vram=True), resolve=lambda _n: model, threads=1,
        preview_interval_s=0,
    )  # fmt: skip
    previews: list[bytes] = []

    def watch(progress: StepProgress) -> StepDecision:
        assert progress.preview_png is not None
        previews.append(progress.preview_png)
        return StepDecision.CONTINUE

    outcome = run(watched, qwen_params(**INPAINT), tmp_path, "previewed", on_step=watch)
    assert outcome.kind is OutcomeKind.COMPLETED and len(previews) == STEPS  # 0.9 of 3 skips none
    assert Image.open(io.BytesIO(previews[-1])).size == (64, 48)
    assert watched.load("m").pipe.vae.use_tiling
    assert outcome.image_path is not None
    plain = ours(runner, qwen_params(**INPAINT), tmp_path, "plain")
    assert max_diff(pixels(outcome.image_path), plain) == 0
    linear = QwenImagePreviewer(watched.load("m").pipe)
    linear._tiny = False  # as for the released VAE, too big to decode every step
    png = linear.png(torch.randn(1, 16, 6, 8), (64, 48))
    assert Image.open(io.BytesIO(png)).size == (64, 48)


Job = tuple[ModelInfo, GenerationParams, Path, str]


def _resume_in_child(jobs: list[Job]) -> None:
    for model, params, folder, name in jobs:
        outcome = run(runner_for(model), params, folder, name)
        assert outcome.kind is OutcomeKind.COMPLETED and outcome.resumed_from is not None


def test_a_pause_and_a_crash_resume_in_a_fresh_process_to_the_same_image(
    model: ModelInfo, runner: Runner, tmp_path: Path, fresh_process: Callable[..., Any]
) -> None:
    """Paused at step 1 (CFG, img2img, inpaint only masked), and a crash after a rolling
    checkpoint: a new process (a worker after a restart) finishes each to the image of an
    uninterrupted run."""
    paused_cases = [
        qwen_params(),
        qwen_params(**IMG2IMG),
        qwen_params(**{**INPAINT, "only_masked": True, "width": 32, "height": 32}),
    ]
    jobs: list[Job] = []
    for index, params in enumerate(paused_cases):
        outcome = run(runner, params, tmp_path, f"job-{index}", on_step=pause_at(PAUSE_AT))
        assert outcome.kind is OutcomeKind.PAUSED
        jobs.append((model, params, tmp_path, f"job-{index}"))
    crashed = qwen_params(**INPAINT, seed=99)
    with pytest.raises(Crash):
        run(runner, crashed, tmp_path, "crashed", on_step=checkpoint_then_crash(PAUSE_AT))
    saved = load_checkpoint(tmp_path / "crashed.ckpt").checkpoint
    assert {"inpaint_mask", "inpaint_image_latents", "inpaint_noise"} <= set(saved.conditioning)
    jobs.append((model, crashed, tmp_path, "crashed"))
    fresh_process(_resume_in_child, jobs)  # spawned, as a worker after a crash
    for _, params, _, name in jobs:
        reference = ours(runner, params, tmp_path, f"reference-{name}")
        assert not (tmp_path / f"{name}.ckpt").exists()
        assert max_diff(reference, pixels(tmp_path / f"{name}.png")) == 0, params


def test_in_bfloat16_easel_equals_the_stock_pipeline_and_resumes_exactly(
    folder: Path, model: ModelInfo, tmp_path: Path
) -> None:
    """bfloat16 arithmetic as on a GPU, run here on the CPU, the stock pipeline loaded in
    bfloat16: text to image and inpaint equal it, and a paused inpaint resumes exactly
    (its blending tensors restored in the latents' dtype)."""
    from diffusers import QwenImagePipeline

    bf16 = DeviceChoice("cpu", "bfloat16")
    runner = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    pipe = QwenImagePipeline.from_pretrained(folder, dtype=torch.bfloat16, local_files_only=True)
    for index, params in enumerate((qwen_params(), qwen_params(**INPAINT))):
        image = ours(runner, params, tmp_path, f"ours-{index}")
        assert max_diff(image, stock(pipe, params)) == 0, params
    assert runner.load("m").pipe.transformer.dtype == torch.bfloat16
    paused = run(runner, params, tmp_path, "job", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    fresh = Runner(device=bf16, resolve=lambda _n: model, threads=1)
    assert run(fresh, params, tmp_path, "job").resumed_from is not None
    assert max_diff(pixels(tmp_path / "job.png"), image) == 0


def test_a_qwen_image_lora_equals_diffusers_load_lora_weights_and_leaves_with_its_job(
    folder: Path, model: ModelInfo, runner: Runner, tmp_path: Path
) -> None:
    """`<lora:name:1>` in the prompt: the stock pipeline after `load_lora_weights`; the
    next job, naming none, is the plain model's image again."""
    from diffusers import QwenImagePipeline

    lora = write_tiny_qwen_lora(tmp_path / "lora" / "lightning.safetensors")
    with_loras = Runner(
        device=CPU, resolve=lambda _n: model, threads=1,
        cache=PipelineCache(lora_folders=[lora.parent]),
    )  # fmt: skip
    params = qwen_params(prompt="the cat <lora:lightning:1>")
    image = ours(with_loras, params, tmp_path, "lora")
    pipe: Any = QwenImagePipeline.from_pretrained(folder, local_files_only=True)
    pipe.load_lora_weights(str(lora))
    assert max_diff(image, stock(pipe, qwen_params())) == 0
    plain = ours(with_loras, qwen_params(), tmp_path, "plain")
    assert max_diff(plain, ours(runner, qwen_params(), tmp_path, "reference")) == 0
    assert max_diff(image, plain) > 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"scheduler": "DPM++ 2M"}, r"Qwen-Image models run with the Euler sampler \(flow"),
        ({"width": 72}, "Qwen-Image draws sizes in multiples of 16 pixels, not 72x64"),
    ],
)
def test_what_qwen_image_cannot_run_is_refused_at_submit_in_one_sentence(
    folder: Path, changes: dict[str, Any], message: str
) -> None:
    search = ModelSearchPath(user=(folder.parent,))
    base = params_for("qwen", steps=STEPS)
    assert check_runnable(base, search).architecture is Architecture.QWEN_IMAGE
    with pytest.raises(BadInput, match=message):
        check_runnable(params_for("qwen", steps=STEPS, **changes), search)


@pytest.mark.parametrize("prefix", ["", "model.diffusion_model."])
def test_a_comfyui_split_qwen_image_file_alone_says_what_it_needs(
    stock_pipe: Any, tmp_path: Path, prefix: str
) -> None:
    """ComfyUI's `diffusion_models/qwen_image_*.safetensors` (diffusers' key names, bare or
    under `model.diffusion_model.`): recognised as Qwen-Image, not "no model Easel knows",
    and, alone, refused naming the parts it needs beside it (test_qwen_files.py runs them)."""
    from safetensors.torch import save_file

    from app.engine.generation.files.transformer_files import detect_model_file

    weights = {prefix + k: v.contiguous() for k, v in stock_pipe.transformer.state_dict().items()}
    path = tmp_path / "diffusion_models" / "qwen_image_bf16.safetensors"
    path.parent.mkdir()
    save_file(weights, path)
    detected = detect_model_file(path)
    assert not detected.supported
    assert detected.unsupported_reason == (
        "qwen_image_bf16: needs a Qwen2.5-VL text encoder (qwen_2.5_vl_7b.safetensors) in "
        "text_encoders/ and Qwen-Image's VAE (qwen_image_vae.safetensors) in vae/"
    )
