"""Comparing images the way the exactness tests and benchmarks do (torch only when asked).

`stock_image` runs the stock diffusers pipeline with the same seed and scheduler as our
own loop, the reference every architecture, LoRA and img2img figure is held to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from app.engine.jobs.params import GenerationParams


def pixels(image: Path | Image.Image) -> np.ndarray:
    """RGB pixels as int16, so differences of two images never wrap around."""
    if isinstance(image, Path):
        with Image.open(image) as opened:
            return np.asarray(opened.convert("RGB")).astype(np.int16)
    return np.asarray(image.convert("RGB")).astype(np.int16)


def max_diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a - b).max())


def stock_image(pipe: Any, params: GenerationParams, **extra: Any) -> np.ndarray:
    """The stock diffusers pipeline's image for `params` (same seed, same scheduler)."""
    import torch

    from app.engine.generation import denoise

    original = pipe.scheduler
    pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    try:
        image = pipe(
            params.prompt,
            negative_prompt=params.negative_prompt,
            num_inference_steps=params.steps,
            guidance_scale=params.cfg,
            width=params.width,
            height=params.height,
            generator=torch.Generator().manual_seed(params.seed),
            **extra,
        ).images[0]
    finally:
        pipe.scheduler = original
    return pixels(image)
