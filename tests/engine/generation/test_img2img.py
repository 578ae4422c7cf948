"""img2img in our own loop, on the tiny random pipeline: the stock result, exact pause/resume."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import StableDiffusionImg2ImgPipeline
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.device import CPU
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.jobs.params import SCHEDULERS, GenerationParams, InvalidParameters
from app.engine.jobs.run_inputs import RunInputs
from tests.easel_png import read_png_params
from tests.engine.conftest import TINY_MODEL
from tests.engine.generation.test_generation_runner import (
    BUNDLED,
    decide_at,
    go_on,
    pixels,
    recording,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS = 10
STRENGTH = 0.6  # 6 of the 10 steps run


def init_png(size: tuple[int, int] = (64, 64)) -> bytes:
    """A picture with structure (a gradient and a square), so img2img has something to keep."""
    x = np.linspace(0, 255, size[0], dtype=np.uint8)
    rgb = np.stack([np.tile(x, (size[1], 1))] * 3, axis=-1)
    rgb[size[1] // 4 : size[1] // 2, size[0] // 4 : size[0] // 2] = (200, 30, 30)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def params_for(scheduler: str = "Euler", **changes: object) -> GenerationParams:
    base = GenerationParams(
        "the cat", negative_prompt="a dog", model=TINY_MODEL, scheduler=scheduler, steps=STEPS,
        cfg=7.0, width=64, height=64, seed=1234, init_image="job:1", strength=STRENGTH,
    )  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def run(
    runner: Runner,
    params: GenerationParams,
    folder: Path,
    name: str,
    *,
    init: bytes | None = None,
    on_step: Callable[[StepProgress], StepDecision] = go_on,
) -> Path:
    out = runner.run(
        params, RunInputs(init_image=init_png() if init is None else init),
        output_path=folder / f"{name}.png", checkpoint_path=folder / f"{name}.ckpt",
        on_step=on_step,
    )  # fmt: skip
    assert out.kind is OutcomeKind.COMPLETED and out.image_path is not None
    return out.image_path


def stock_img2img(runner: Runner, params: GenerationParams, image: Image.Image) -> np.ndarray:
    pipe = runner.load(params.model).pipe
    stock: Any = StableDiffusionImg2ImgPipeline(**pipe.components)  # diffusers has no types
    stock.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    stock.set_progress_bar_config(disable=True)
    result = stock(
        params.prompt,
        image=image,
        strength=params.strength,
        negative_prompt=params.negative_prompt,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]
    return np.asarray(result).astype(np.int16)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("strength", [0.6, 1.0])
def test_our_img2img_equals_the_stock_pipeline(
    tiny_runner: Runner, tmp_path: Path, scheduler: str, strength: float
) -> None:
    params = params_for(scheduler, strength=strength)
    ours = pixels(run(tiny_runner, params, tmp_path, "ours"))
    stock = stock_img2img(tiny_runner, params, Image.open(io.BytesIO(init_png())))
    assert int(np.abs(ours - stock).max()) == 0


def test_the_loop_starts_at_the_strengths_timestep(tiny_runner: Runner, tmp_path: Path) -> None:
    seen: list[StepProgress] = []
    run(tiny_runner, params_for(), tmp_path, "a", on_step=recording(seen))
    assert [p.step for p in seen] == [1, 2, 3, 4, 5, 6]
    assert {p.total for p in seen} == {6}


def test_the_init_image_shapes_the_result(tiny_runner: Runner, tmp_path: Path) -> None:
    plain = pixels(run(tiny_runner, params_for(), tmp_path, "plain"))
    flipped = Image.open(io.BytesIO(init_png())).transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    buffer = io.BytesIO()
    flipped.save(buffer, format="PNG")
    changed = pixels(run(tiny_runner, params_for(), tmp_path, "flipped", init=buffer.getvalue()))
    assert int(np.abs(plain - changed).max()) > 0


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_pause_then_resume_of_img2img_is_exact(
    tiny_runner: Runner, tmp_path: Path, scheduler: str
) -> None:
    params = params_for(scheduler)
    reference = pixels(run(tiny_runner, params, tmp_path, "reference"))
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    paused = tiny_runner.run(
        params, RunInputs(init_image=init_png()), output_path=out, checkpoint_path=ckpt,
        on_step=decide_at(2, StepDecision.PAUSE),
    )  # fmt: skip
    assert paused.kind is OutcomeKind.PAUSED and not out.exists()
    resumed: list[StepProgress] = []
    tiny_runner.run(
        params, RunInputs(init_image=init_png()), output_path=out, checkpoint_path=ckpt,
        on_step=recording(resumed),
    )  # fmt: skip
    assert [p.step for p in resumed] == [3, 4, 5, 6]
    assert int(np.abs(pixels(out) - reference).max()) == 0


def test_cancel_stops_within_a_step(tiny_runner: Runner, tmp_path: Path) -> None:
    seen: list[StepProgress] = []

    def cancel_at_2(progress: StepProgress) -> StepDecision:
        seen.append(progress)
        return StepDecision.CANCEL if progress.step == 2 else StepDecision.CONTINUE

    outcome = tiny_runner.run(
        params_for(), RunInputs(init_image=init_png()), output_path=tmp_path / "x.png",
        checkpoint_path=tmp_path / "x.ckpt", on_step=cancel_at_2,
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.CANCELLED
    assert [p.step for p in seen] == [1, 2]
    assert not (tmp_path / "x.png").exists()


def test_an_init_image_of_another_size_is_resized_and_the_png_names_its_parent(
    tiny_runner: Runner, tmp_path: Path
) -> None:
    params = params_for(width=128, height=64, init_image="job:42", strength=0.35)
    out = run(tiny_runner, params, tmp_path, "upscaled", init=init_png((64, 32)))
    with Image.open(out) as image:
        assert image.size == (128, 64)
        assert "Denoising strength: 0.35" in image.info["parameters"]
    stored = read_png_params(out)
    assert (stored.init_image, stored.strength) == ("job:42", 0.35)


def test_an_init_image_that_is_missing_or_not_an_image_is_refused(
    tiny_runner: Runner, tmp_path: Path
) -> None:
    with pytest.raises(InvalidParameters, match="named, but none given"):
        tiny_runner.run(
            params_for(), output_path=tmp_path / "x.png", checkpoint_path=tmp_path / "x.ckpt",
            on_step=go_on,
        )  # fmt: skip
    with pytest.raises(InvalidParameters, match="not an image that can be read"):
        run(tiny_runner, params_for(), tmp_path, "x", init=b"not a png")


@pytest.mark.slow
@pytest.mark.skipif(
    not (BUNDLED / "model_index.json").exists(), reason="bundled model not trained yet"
)
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_bundled_model_img2img_equals_the_stock_pipeline_and_resumes_exactly(
    tmp_path: Path, scheduler: str
) -> None:
    runner = Runner(device=CPU, threads=1)  # finds the bundled easel-tiny
    params = GenerationParams(
        "a red circle on a blue background", scheduler=scheduler, steps=8, seed=5,
        init_image="job:1", strength=0.5,
    )  # fmt: skip
    ours = pixels(run(runner, params, tmp_path, "ours"))
    stock = stock_img2img(runner, params, Image.open(io.BytesIO(init_png())))
    assert int(np.abs(ours - stock).max()) == 0
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    for on_step in (decide_at(2, StepDecision.PAUSE), go_on):
        runner.run(
            params, RunInputs(init_image=init_png()), output_path=out, checkpoint_path=ckpt,
            on_step=on_step,
        )  # fmt: skip
    assert int(np.abs(pixels(out) - ours).max()) == 0
