"""Inpaint in our own loop, on tiny random models: the stock inpaint pipelines' image, the
kept area kept, exact pause/resume (in a fresh process too), only masked pasted back."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import StableDiffusionInpaintPipeline, StableDiffusionXLInpaintPipeline
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.jobs.mask import open_mask
from app.engine.jobs.params import SCHEDULERS, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.tiny_architectures import (
    go_on,
    max_diff,
    model_info,
    params_for,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS = 5
MASK_DIGEST = "upload:" + "0" * 64  # the runner is handed the bytes; only the name is checked


def mask_png(
    size: tuple[int, int] = (64, 64), box: tuple[int, int, int, int] = (16, 8, 48, 40)
) -> bytes:
    mask = Image.new("L", size, 0)
    mask.paste(255, box)
    buffer = io.BytesIO()
    mask.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelInfo]:
    from app.testing.tiny.unet import write_tiny_pipeline

    root = tmp_path_factory.mktemp("inpaint-models")
    folders = {
        "sd1": write_tiny_pipeline(root / "sd1", architecture=Architecture.SD1),
        "sdxl": write_tiny_pipeline(root / "sdxl", architecture=Architecture.SDXL),
        "sd1-inpainting": write_tiny_pipeline(
            root / "sd1-inpainting", architecture=Architecture.SD1, inpainting=True
        ),
        "sdxl-inpainting": write_tiny_pipeline(
            root / "sdxl-inpainting", architecture=Architecture.SDXL, inpainting=True
        ),
    }
    return {name: model_info(path, name) for name, path in folders.items()}


@pytest.fixture(scope="module")
def runners(models: dict[str, ModelInfo]) -> dict[str, Runner]:
    return {name: runner_for(model) for name, model in models.items()}


def inpaint_params(model: str, scheduler: str = "Euler", **changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "steps": STEPS, "init_image": "job:1", "strength": 1.0, "mask": MASK_DIGEST,
        "mask_blur": 4,
    }  # fmt: skip
    return params_for(model, scheduler, **{**base, **changes})


def ours(
    runner: Runner,
    params: GenerationParams,
    folder: Path,
    name: str = "ours",
    *,
    mask: bytes | None = None,
    image: bytes | None = None,
    on_step: Any = go_on,
) -> Any:
    return runner.run(
        params, RunInputs(init_image=image or init_png(), mask=mask or mask_png()),
        output_path=folder / f"{name}.png", checkpoint_path=folder / f"{name}.ckpt",
        on_step=on_step,
    )  # fmt: skip


def finished(outcome: Any) -> np.ndarray:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


STOCK = {
    "sd1": StableDiffusionInpaintPipeline,
    "sd1-inpainting": StableDiffusionInpaintPipeline,
    "sdxl": StableDiffusionXLInpaintPipeline,
    "sdxl-inpainting": StableDiffusionXLInpaintPipeline,
}


def stock(
    runner: Runner,
    params: GenerationParams,
    *,
    mask: bytes | None = None,
    image: bytes | None = None,
    **extra: Any,
) -> np.ndarray:
    """The stock inpaint pipeline, called as its documentation shows (mask blurred first)."""
    pipe = runner.load(params.model).pipe
    stock_pipe: Any = STOCK[params.model](**pipe.components)
    stock_pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    stock_pipe.set_progress_bar_config(disable=True)
    mask_image = Image.open(io.BytesIO(mask or mask_png()))
    if params.mask_blur:
        mask_image = stock_pipe.mask_processor.blur(mask_image, blur_factor=params.mask_blur)
    result = stock_pipe(
        params.prompt,
        image=Image.open(io.BytesIO(image or init_png())),
        mask_image=mask_image,
        strength=params.strength,
        negative_prompt=params.negative_prompt,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        width=params.width,
        height=params.height,
        generator=torch.Generator().manual_seed(params.seed),
        **extra,
    ).images[0]
    return pixels(result)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("model", ["sd1", "sdxl", "sd1-inpainting"])
def test_inpaint_equals_the_stock_pipeline(
    runners: dict[str, Runner], tmp_path: Path, model: str, scheduler: str
) -> None:
    params = inpaint_params(model, scheduler, strength=0.75 if scheduler == "DDIM" else 1.0)
    image = finished(ours(runners[model], params, tmp_path))
    assert max_diff(image, stock(runners[model], params)) == 0


def test_an_sdxl_inpainting_fine_tune_equals_the_stock_pipeline(
    runners: dict[str, Runner], tmp_path: Path
) -> None:
    params = inpaint_params("sdxl-inpainting", "Euler a", strength=0.9999)  # its default
    assert runners["sdxl-inpainting"].load("sdxl-inpainting").model.inpainting
    image = finished(ours(runners["sdxl-inpainting"], params, tmp_path))
    assert max_diff(image, stock(runners["sdxl-inpainting"], params)) == 0


@pytest.mark.parametrize("model", ["sd1", "sdxl"])
def test_outside_a_hard_mask_the_image_is_the_stock_pipelines(
    runners: dict[str, Runner], tmp_path: Path, model: str
) -> None:
    """No blur: the kept area is the image's latents at every step (the VAE's round trip is
    what changes it, as in the stock pipeline); the masked area is repainted."""
    params = inpaint_params(model, mask_blur=0, strength=1.0)
    image = finished(ours(runners[model], params, tmp_path))
    reference = stock(runners[model], params)
    assert max_diff(image, reference) == 0
    source = pixels(Image.open(io.BytesIO(init_png())))
    keep = np.asarray(open_mask(mask_png())) == 0
    repainted = max_diff(image[~keep], source[~keep])
    # The tiny VAE is random: its round trip changes kept pixels too, but far less than a
    # repaint from noise changes the masked ones.
    assert int(np.abs(image[keep] - source[keep]).mean()) < repainted


def test_the_mask_decides_what_changes(runners: dict[str, Runner], tmp_path: Path) -> None:
    params = inpaint_params("sd1")
    one = finished(ours(runners["sd1"], params, tmp_path, "a"))
    other = finished(ours(runners["sd1"], params, tmp_path, "b", mask=mask_png(box=(0, 0, 16, 16))))
    assert max_diff(one, other) > 0


@pytest.mark.parametrize("model", ["sd1", "sd1-inpainting"])
def test_pause_then_resume_of_inpaint_is_exact(
    runners: dict[str, Runner], tmp_path: Path, model: str
) -> None:
    params = inpaint_params(model, "DPM++ 2M", strength=0.8)
    reference = finished(ours(runners[model], params, tmp_path, "reference"))
    paused = ours(
        runners[model], params, tmp_path, "job",
        on_step=lambda p: StepDecision.PAUSE if p.step == 2 else StepDecision.CONTINUE,
    )  # fmt: skip
    assert paused.kind is OutcomeKind.PAUSED
    seen: list[StepProgress] = []

    def record(progress: StepProgress) -> StepDecision:
        seen.append(progress)
        return StepDecision.CONTINUE

    resumed = finished(ours(runners[model], params, tmp_path, "job", on_step=record))
    assert [p.step for p in seen] == [3, 4]
    assert max_diff(resumed, reference) == 0


def _resume_in_child(model: ModelInfo, params: GenerationParams, folder: Path) -> None:
    outcome = ours(runner_for(model), params, folder, "job")
    assert outcome.kind is OutcomeKind.COMPLETED


def test_a_crash_mid_inpaint_resumes_in_a_fresh_process_to_the_same_image(
    models: dict[str, ModelInfo], runners: dict[str, Runner], tmp_path: Path,
    fresh_process: Callable[..., Any],
) -> None:  # fmt: skip
    """A rolling checkpoint, then the process is gone: a new process (a new worker after a
    crash) resumes from the checkpoint to the uninterrupted image."""
    params = inpaint_params("sdxl", "Euler a", only_masked=True, mask_padding=8)
    runner = runners["sdxl"]
    reference = finished(ours(runner, params, tmp_path, "reference"))

    class Crash(Exception):
        pass

    def checkpoint_then_crash(progress: StepProgress) -> StepDecision:
        if progress.step == 2:
            return StepDecision.CHECKPOINT
        if progress.step == 3:
            raise Crash  # nothing written after the rolling checkpoint: as a killed worker
        return StepDecision.CONTINUE

    with pytest.raises(Crash):
        ours(runner, params, tmp_path, "job", on_step=checkpoint_then_crash)
    assert (tmp_path / "job.ckpt").exists()
    fresh_process(_resume_in_child, models["sdxl"], params, tmp_path)
    assert max_diff(pixels(tmp_path / "job.png"), reference) == 0


@pytest.mark.parametrize("model", ["sd1", "sdxl"])
def test_only_masked_equals_the_stock_pipelines_padding_mask_crop(
    runners: dict[str, Runner], tmp_path: Path, model: str
) -> None:
    """A1111's "only masked" is the stock pipelines' `padding_mask_crop`: a 128x96 picture,
    the mask's box plus 8 px generated at 64x64 and pasted back through the blurred mask."""
    picture, mask = init_png((128, 96)), mask_png((128, 96), (70, 30, 100, 60))
    params = inpaint_params(model, "Euler a", only_masked=True, mask_padding=8, strength=0.9)
    image = finished(ours(runners[model], params, tmp_path, mask=mask, image=picture))
    assert image.shape == (96, 128, 3)
    reference = stock(runners[model], params, mask=mask, image=picture, padding_mask_crop=8)
    assert max_diff(image, reference) == 0
    source = pixels(Image.open(io.BytesIO(picture)))
    far = np.zeros((96, 128), dtype=bool)
    far[:, :40] = True  # well outside the box and its blurred edge: the picture itself
    assert max_diff(image[far], source[far]) == 0


def test_an_inpainting_checkpoint_file_is_detected_listed_and_runs_as_the_stock_pipeline(
    runners: dict[str, Runner], tmp_path: Path
) -> None:
    """A single .safetensors file with a 9-channel UNet (as SD 1.5 inpainting ships): told
    apart by its first convolution's shape, listed as such, and loaded with 9 channels."""
    import shutil

    from app.engine.generation.files.sources import ModelSearchPath, list_models
    from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
    from app.testing.tiny.unet import write_tiny_pipeline, write_tiny_single_file

    configs = tmp_path / "configs"
    write_tiny_pipeline(tmp_path / "folder", architecture=Architecture.SD1)
    shutil.copytree(
        tmp_path / "folder", configs / "sd1", ignore=shutil.ignore_patterns("*.safetensors")
    )
    write_tiny_single_file(tmp_path / "models" / "tiny-inpainting.safetensors", inpainting=True)
    [model] = list_models(ModelSearchPath(user=(tmp_path / "models",)))
    assert model.supported and model.inpainting and "inpainting" in model.label
    runner = Runner(
        device=runners["sd1"].device, resolve=lambda _n: model, threads=1,
        cache=PipelineCache(configs=SingleFileConfigs(configs)),
    )  # fmt: skip
    assert runner.load(model.name).pipe.unet.config.in_channels == 9
    params = inpaint_params(model.name, "Euler a", strength=0.8)
    image = finished(ours(runner, params, tmp_path))
    pipe = runner.load(model.name).pipe
    stock_pipe: Any = StableDiffusionInpaintPipeline(**pipe.components)
    stock_pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    stock_pipe.set_progress_bar_config(disable=True)
    mask_image = stock_pipe.mask_processor.blur(Image.open(io.BytesIO(mask_png())), 4)
    reference = stock_pipe(
        params.prompt, image=Image.open(io.BytesIO(init_png())), mask_image=mask_image,
        strength=params.strength, negative_prompt=params.negative_prompt,
        num_inference_steps=params.steps, guidance_scale=params.cfg, width=64, height=64,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    assert max_diff(image, pixels(reference)) == 0


def test_an_inpainting_model_without_a_mask_is_refused(
    runners: dict[str, Runner], tmp_path: Path
) -> None:
    from app.engine.jobs.params import InvalidParameters

    params = params_for("sd1-inpainting")
    with pytest.raises(InvalidParameters, match="needs an image and a mask"):
        runners["sd1-inpainting"].run(
            params, output_path=tmp_path / "x.png", checkpoint_path=tmp_path / "x.ckpt",
            on_step=go_on,
        )  # fmt: skip
