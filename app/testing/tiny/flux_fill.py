"""A tiny random Flux.1 Fill pipeline, for tests and benchmarks: `tiny.flux`'s dev-style
components (a guidance embedder) with a transformer shaped as FLUX.1-Fill-dev's: its input
the latents, the masked picture's latents and the mask, packed (`fill_in_channels`: 384 with
the 16-channel, 8x VAE, as the released one), its output the latents' 64. Saved with
`save_pretrained`, the folder loads as a `FluxFillPipeline` from disk alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.engine.generation.families.flux import fill_in_channels
from app.testing.tiny.flux import FLUX_LATENT_CHANNELS, build_tiny_flux


def build_tiny_flux_fill(*, seed: int = 0) -> Any:
    """A tiny `FluxFillPipeline`."""
    import torch
    from diffusers import FluxFillPipeline, FluxTransformer2DModel

    flux = build_tiny_flux(guidance_embeds=True, seed=seed)
    parts = {name: part for name, part in flux.components.items() if part is not None}
    like = dict(flux.transformer.config)
    vae_scale_factor = 2 ** (len(flux.vae.config.block_out_channels) - 1)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        parts["transformer"] = FluxTransformer2DModel(
            patch_size=1,
            in_channels=fill_in_channels(FLUX_LATENT_CHANNELS, vae_scale_factor),
            out_channels=FLUX_LATENT_CHANNELS * 4,
            num_layers=like["num_layers"],
            num_single_layers=like["num_single_layers"],
            attention_head_dim=like["attention_head_dim"],
            num_attention_heads=like["num_attention_heads"],
            joint_attention_dim=like["joint_attention_dim"],
            pooled_projection_dim=like["pooled_projection_dim"],
            guidance_embeds=True,
            axes_dims_rope=tuple(like["axes_dims_rope"]),
        )
    return FluxFillPipeline(**parts)


def write_tiny_flux_fill(dest: Path, *, seed: int = 0) -> Path:
    """Save `build_tiny_flux_fill(...)` as a diffusers folder at `dest`."""
    pipe = build_tiny_flux_fill(seed=seed)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest
