"""Every VAE encode and decode, in the precision the stock pipelines give the VAE.

SDXL's VAE overflows in float16 (NaN, a black image); its config says so (`force_upcast`)
and diffusers' SDXL pipelines then run it in float32 and move it back after:
`prepare_latents` (img2img) and `_encode_vae_image` (inpaint) whenever the config asks,
the decode after the loop when the VAE is in float16. Their latents are normalised with
the config's `latents_mean`/`latents_std` where it has them (img2img's encode and every
decode; the inpaint pipeline's encode forgets it, which would leave its kept area in other
units than the loop's, so here every encode normalises). The SD 1.x/2.x, Flux, SD 3.x,
Z-Image and Flux.2 pipelines never upcast (whatever `force_upcast` says), so their
families pass `upcast=False`: the same arithmetic as stock in every dtype.

What no stock pipeline does: a VAE that produced NaN or infinity raises `NonFiniteVaeOutput`
(never a garbage image), and the runner retries the job once with that VAE kept in float32
(`keep_in_float32`), every call upcast as SDXL's are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion_img2img import (
    retrieve_latents,
)

from app.engine.generation.errors import NonFiniteVaeOutput

# Set on a VAE module by `keep_in_float32`: it stays with the loaded pipeline, so a model
# whose VAE overflowed once does not fail a first attempt on every later job.
_FLOAT32_ATTRIBUTE = "_easel_vae_float32"


def encode_upcasts(vae: Any) -> bool:
    """Whether SDXL's pipelines encode in float32: whenever the config asks."""
    return bool(getattr(vae.config, "force_upcast", False))


def decode_upcasts(vae: Any) -> bool:
    """Whether SDXL's pipelines decode in float32: a float16 VAE whose config asks."""
    return vae.dtype == torch.float16 and bool(getattr(vae.config, "force_upcast", False))


def keep_in_float32(vae: Any) -> bool:
    """From now on run `vae` in float32 for every call; False if it did so already (a
    retry would change nothing)."""
    if vae.dtype == torch.float32 or getattr(vae, _FLOAT32_ATTRIBUTE, False):
        return False
    setattr(vae, _FLOAT32_ATTRIBUTE, True)
    return True


@contextmanager
def _precision(vae: Any, upcast: bool) -> Iterator[torch.dtype]:
    """`vae` in float32 inside the block if `upcast` (or `keep_in_float32`), then back in
    its own dtype (as the stock pipelines' `vae.to(...)` before and after); yields the
    dtype it runs in."""
    own = vae.dtype
    upcast = upcast or getattr(vae, _FLOAT32_ATTRIBUTE, False)
    if not upcast or own == torch.float32:
        yield own
        return
    vae.to(dtype=torch.float32)
    try:
        yield torch.float32
    finally:
        vae.to(dtype=own)


def run_encoder(
    vae: Any, pixels: torch.Tensor, upcast: bool, encode: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """`encode(pixels)` in the VAE's precision, cast back to the pixels' dtype (as the stock
    pipelines cast the latents to the job's dtype)."""
    dtype = pixels.dtype
    with _precision(vae, upcast) as vae_dtype:
        latents = encode(pixels.to(vae_dtype)).to(dtype)
    _check_finite(latents, "encoded the image into")
    return latents


def encode(
    vae: Any, pixels: torch.Tensor, generator: torch.Generator, *, upcast: bool
) -> torch.Tensor:
    """`pixels` ([-1, 1]) as the latents the loop starts from: the VAE's latent distribution
    sampled with `generator`, then normalised (`normalised`)."""

    def sample(image: torch.Tensor) -> torch.Tensor:
        sampled: torch.Tensor = retrieve_latents(vae.encode(image), generator=generator)
        return sampled

    return normalised(vae.config, run_encoder(vae, pixels, upcast, sample))


def run_decoder(
    vae: Any,
    latents: torch.Tensor,
    upcast: bool,
    decode: Callable[[torch.Tensor], torch.Tensor],
    *,
    check: bool = True,
) -> torch.Tensor:
    """`decode(latents)`, the latents cast to the VAE's precision first (SDXL's pipeline
    casts before it unscales); the image in the dtype the VAE ran in."""
    with _precision(vae, upcast) as vae_dtype:
        image = decode(latents.to(vae_dtype))
    if check:
        _check_finite(image, "decoded the latents into")
    return image


def decode(
    vae: Any,
    latents: torch.Tensor,
    *,
    upcast: bool,
    generator: torch.Generator | None = None,
    check: bool = True,
) -> torch.Tensor:
    """Loop latents as an image tensor in [-1, 1]: unnormalised (`unscaled`), decoded.
    `generator` only where the stock pipeline passes it (SD 1.x/2.x: a consistency decoder
    draws noise); `check=False` for previews, which must never fail a job."""
    extra = {} if generator is None else {"generator": generator}

    def unscale_and_decode(scaled: torch.Tensor) -> torch.Tensor:
        decoded = vae.decode(unscaled(vae.config, scaled), return_dict=False, **extra)
        image: torch.Tensor = decoded[0]
        return image

    return run_decoder(vae, latents, upcast, unscale_and_decode, check=check)


def normalised(config: Any, latents: torch.Tensor) -> torch.Tensor:
    """The VAE's latents as the loop's: `(x - mean) * scale / std` where the config has a
    mean and std (some SDXL VAEs), `(x - shift) * scale` with a shift (Flux, SD 3.x,
    Z-Image), else `scale * x`; in the stock pipelines' order of operations."""
    mean, std = _mean_and_std(config, latents)
    if mean is not None and std is not None:
        return (latents - mean) * config.scaling_factor / std
    shift = getattr(config, "shift_factor", None)
    if shift is not None:
        return (latents - shift) * config.scaling_factor
    scaled: torch.Tensor = config.scaling_factor * latents
    return scaled


def unscaled(config: Any, latents: torch.Tensor) -> torch.Tensor:
    """`normalised` undone, as the stock pipelines before their decode."""
    mean, std = _mean_and_std(config, latents)
    if mean is not None and std is not None:
        return latents * std / config.scaling_factor + mean
    shift = getattr(config, "shift_factor", None)
    if shift is not None:
        return latents / config.scaling_factor + shift
    divided: torch.Tensor = latents / config.scaling_factor
    return divided


def _mean_and_std(
    config: Any, latents: torch.Tensor
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    mean = getattr(config, "latents_mean", None)
    std = getattr(config, "latents_std", None)
    if mean is None or std is None:
        return None, None
    channels = latents.shape[1]
    return (
        torch.tensor(mean).view(1, channels, 1, 1).to(latents.device, latents.dtype),
        torch.tensor(std).view(1, channels, 1, 1).to(latents.device, latents.dtype),
    )


def _check_finite(values: torch.Tensor, what: str) -> None:
    """One reduction over the tensor: well under a millisecond beside the VAE's own time."""
    if not bool(torch.isfinite(values).all()):
        raise NonFiniteVaeOutput(
            f"the VAE {what} invalid values (NaN or infinity) in {str(values.dtype)[6:]}; "
            "no image was written"
        )
