"""Small preview images of a generation in progress, made from the latents between steps.

Two ways, chosen once per loaded model:
- a tiny VAE (like the bundled model's) simply decodes the scheduler's x0 estimate: a few
  milliseconds, and a linear map cannot follow a VAE that spreads colour across latent
  pixels (a least-squares fit on easel-tiny's VAE was off by ~40/255 on flat shapes);
- a big VAE would cost as much as a denoising step, so a fixed linear latent -> RGB map
  (the factors the family declares) is used instead: microseconds, rough but recognisable.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Sequence
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from PIL import Image

from app.engine.generation.loop import vae_precision

PREVIEW_MAX_SIDE = 128
TINY_VAE_MAX_PARAMS = 5_000_000  # SD's VAE has 83M; easel-tiny's well under 1M


class Previewer(Protocol):
    def png(self, latents: torch.Tensor, image_size: tuple[int, int]) -> bytes:
        """(1, C, h, w) scaled latents -> PNG bytes at most PREVIEW_MAX_SIDE pixels wide/high."""
        ...


def previewer_for(pipe: Any, own: str = "", factors: Sequence[Sequence[float]] = ()) -> Previewer:
    """How `pipe`'s previews are drawn: by the family's own previewer where it declares one
    (`own`, "module:Class" taking the pipeline: latents in another layout, as Flux.2's
    patches), else from plain latents, through a tiny VAE or the linear map of `factors`
    (each latent channel's RGB weights, as the family declares them)."""
    if own:
        module, name = own.split(":")
        previewer: Previewer = getattr(importlib.import_module(module), name)(pipe)
        return previewer
    vae = pipe.vae
    if sum(p.numel() for p in vae.parameters()) <= TINY_VAE_MAX_PARAMS:
        return VaePreviewer(vae, int(pipe.vae_scale_factor))
    channels = int(vae.config.latent_channels)
    if len(factors) == channels:
        return LinearPreviewer(torch.tensor(factors))
    return LinearPreviewer(torch.full((channels, 3), 1.0 / channels))  # grey: better than none


class VaePreviewer:
    def __init__(self, vae: Any, scale_factor: int) -> None:
        self._vae = vae
        self._scale_factor = scale_factor

    @torch.no_grad()
    def png(self, latents: torch.Tensor, image_size: tuple[int, int]) -> bytes:
        # Decode only as many pixels as the preview shows: the cost grows with the area.
        width, height = preview_size(image_size)
        size = (-(-height // self._scale_factor), -(-width // self._scale_factor))
        if latents.shape[-2] > size[0] or latents.shape[-1] > size[1]:
            latents = F.interpolate(latents, size=size, mode="area")
        # No generator: AutoencoderKL.decode draws no noise, so the run's RNG is untouched.
        # Unscaled as each family's decode (Flux's and SD 3.x's latents are also shifted),
        # in float32 when the VAE asks (SDXL's overflows in float16); never a failed job.
        vae = self._vae
        upcast = vae_precision.decode_upcasts(vae)
        decoded = vae_precision.decode(vae, latents, upcast=upcast, check=False)
        return png_of(to_uint8_hwc(decoded[0].permute(1, 2, 0)), image_size)


class LinearPreviewer:
    def __init__(self, factors: torch.Tensor) -> None:
        self._factors = factors.float()  # (latent channels, 3), output in [-1, 1]

    def png(self, latents: torch.Tensor, image_size: tuple[int, int]) -> bytes:
        pixels = latents[0].detach().float().cpu().permute(1, 2, 0) @ self._factors
        return png_of(to_uint8_hwc(pixels), image_size)


def to_uint8_hwc(pixels: torch.Tensor) -> Any:
    """[-1, 1] (h, w, 3) -> uint8 numpy array."""
    scaled = (pixels.detach().float().cpu().clamp(-1, 1) + 1) * 127.5
    return scaled.round().to(torch.uint8).numpy()


def png_of(pixels: Any, image_size: tuple[int, int]) -> bytes:
    image = Image.fromarray(pixels, mode="RGB").resize(
        preview_size(image_size), Image.Resampling.BILINEAR
    )
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)  # speed over size: it is thrown away
    return buffer.getvalue()


def preview_size(image_size: tuple[int, int]) -> tuple[int, int]:
    width, height = image_size
    scale = min(1.0, PREVIEW_MAX_SIDE / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))
