"""Inpaint figures on tiny random models: prints `inpaint_same_as_diffusers_max_diff_<arch>`.

For SD 1.x, SD 2.x v-prediction and SDXL (ordinary 4-channel UNets: latent blending) and
an SD 1.x inpainting UNet (9 channels: mask and masked image as input), the pixel
difference (1/255) between Easel's inpaint and the stock `StableDiffusionInpaintPipeline`
/ `StableDiffusionXLInpaintPipeline` called as their users call them (mask blurred with
`mask_processor.blur`, same seed and strength), worst of the four schedulers.
And for Z-Image as a diffusers folder, with true CFG and a negative prompt (`zimage`) and
at Turbo's guidance 0 (`zimage_turbo`): the same figure against the stock
`ZImageInpaintPipeline`, with its one sampler (Euler, flow matching).

Run alone (`.venv/bin/python benchmarks/inpaint.py`) or from benchmarks/generation.py.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.device import CPU
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSource, detected
from app.engine.generation.outcome import StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.jobs.params import SCHEDULERS, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from app.testing.images import max_diff, pixels
from app.testing.tiny.unet import write_tiny_pipeline
from app.testing.tiny.zimage import write_tiny_zimage

SIZE, STEPS = 64, 6
MODELS = {  # figure suffix: (architecture, inpainting UNet)
    "sd15": (Architecture.SD1, False),
    "sd2": (Architecture.SD2, False),
    "sdxl": (Architecture.SDXL, False),
    "sd15_inpainting": (Architecture.SD1, True),
}


def main() -> None:
    run_inpaint()


def run_inpaint() -> None:
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        image, mask = _picture(), _mask()
        for name, (architecture, inpainting) in MODELS.items():
            folder = write_tiny_pipeline(
                work / name, architecture=architecture, inpainting=inpainting
            )
            runner = Runner(device=CPU, resolve=_resolver(name, folder), threads=1)
            worst = max(
                _diff(runner, name, scheduler, image, mask, work) for scheduler in SCHEDULERS
            )
            report(f"inpaint_same_as_diffusers_max_diff_{name}", worst)
        run_zimage_inpaint(work, image, mask)


def run_zimage_inpaint(work: Path, image: bytes, mask: bytes) -> None:
    """The Z-Image rows: a tiny diffusers folder, with CFG and at Turbo's guidance 0."""
    from diffusers import ZImageInpaintPipeline

    folder = write_tiny_zimage(work / "zimage")
    runner = Runner(device=CPU, resolve=_resolver("zimage", folder), threads=1)
    for name, cfg in (("zimage", 5.0), ("zimage_turbo", 0.0)):
        params = GenerationParams(
            "a red hat", negative_prompt="blurry", model="zimage", steps=STEPS, cfg=cfg,
            width=SIZE, height=SIZE, seed=7, init_image="job:1", strength=0.8,
            mask="upload:" + "0" * 64, mask_blur=4,
        )  # fmt: skip
        out = runner.run(
            params, RunInputs(init_image=image, mask=mask), output_path=work / f"{name}.png",
            checkpoint_path=work / f"{name}.ckpt", on_step=_go,
        )  # fmt: skip
        assert out.image_path is not None
        stock: Any = ZImageInpaintPipeline(**runner.load("zimage").pipe.components)
        stock.set_progress_bar_config(disable=True)
        result = stock(
            params.prompt, image=Image.open(io.BytesIO(image)),
            mask_image=stock.mask_processor.blur(Image.open(io.BytesIO(mask)), blur_factor=4),
            strength=params.strength, negative_prompt=params.negative_prompt,
            num_inference_steps=STEPS, guidance_scale=cfg, width=SIZE, height=SIZE,
            generator=torch.Generator().manual_seed(params.seed),
        ).images[0]  # fmt: skip
        diff = max_diff(pixels(out.image_path), pixels(result))
        report(f"inpaint_same_as_diffusers_max_diff_{name}", diff)


def _resolver(name: str, folder: Path) -> Any:
    model = detected(ModelInfo(name, folder, ModelSource.USER))
    return lambda _name: model


def _diff(runner: Runner, name: str, scheduler: str, image: bytes, mask: bytes, work: Path) -> int:
    params = GenerationParams(
        "a red hat", negative_prompt="blurry", model=name, scheduler=scheduler, steps=STEPS,
        cfg=7.0, width=SIZE, height=SIZE, seed=7, init_image="job:1", strength=0.8,
        mask="upload:" + "0" * 64, mask_blur=4,
    )  # fmt: skip
    out = runner.run(
        params, RunInputs(init_image=image, mask=mask),
        output_path=work / f"{name}-{scheduler}.png",
        checkpoint_path=work / f"{name}-{scheduler}.ckpt", on_step=_go,
    )  # fmt: skip
    assert out.image_path is not None
    pipe = runner.load(name).pipe
    stock_class = _stock_class(pipe)
    stock: Any = stock_class(**pipe.components)
    stock.scheduler = denoise.make_scheduler(pipe, scheduler)
    stock.set_progress_bar_config(disable=True)
    result = stock(
        params.prompt, image=Image.open(io.BytesIO(image)),
        mask_image=stock.mask_processor.blur(Image.open(io.BytesIO(mask)), blur_factor=4),
        strength=params.strength, negative_prompt=params.negative_prompt,
        num_inference_steps=STEPS, guidance_scale=params.cfg, width=SIZE, height=SIZE,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    return max_diff(pixels(out.image_path), pixels(result))


def _stock_class(pipe: Any) -> Any:
    from diffusers import (
        StableDiffusionInpaintPipeline,
        StableDiffusionXLInpaintPipeline,
        StableDiffusionXLPipeline,
    )

    if isinstance(pipe, StableDiffusionXLPipeline):
        return StableDiffusionXLInpaintPipeline
    return StableDiffusionInpaintPipeline


def _picture() -> bytes:
    x = np.linspace(0, 255, SIZE, dtype=np.uint8)
    rgb = np.stack(
        [np.tile(x, (SIZE, 1)), np.tile(x[::-1], (SIZE, 1)), np.tile(x, (SIZE, 1)).T], -1
    )
    return _png(Image.fromarray(rgb))


def _mask() -> bytes:
    mask = Image.new("L", (SIZE, SIZE), 0)
    mask.paste(255, (12, 20, 44, 52))
    return _png(mask)


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _go(_: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


def report(name: str, value: object) -> None:
    print(f"{name}: {value}", flush=True)


if __name__ == "__main__":
    main()
