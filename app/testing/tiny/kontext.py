"""A tiny random Flux.1 Kontext pipeline, for tests and benchmarks: `tiny.flux`'s dev-style
components (a guidance embedder; its VAE without mid-block attention) as a
`FluxKontextPipeline`, which is what a Kontext folder
is (the same transformer class, trained to read an input image's tokens too). Saved with
`save_pretrained`, the folder loads as a `FluxKontextPipeline` from disk alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.testing.tiny.flux import build_tiny_flux


def build_tiny_kontext(*, seed: int = 0) -> Any:
    """A tiny `FluxKontextPipeline`."""
    import torch
    from diffusers import AutoencoderKL, FluxKontextPipeline

    flux = build_tiny_flux(guidance_embeds=True, seed=seed)
    parts = {name: part for name, part in flux.components.items() if part is not None}
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        # Kontext reads its input image at about 1 megapixel whatever the job's size: the
        # VAE's mid-block attention there (16,000 tokens, 1 GB of scores) is left out, so
        # that a test's encode takes a fraction of a second.
        parts["vae"] = AutoencoderKL.from_config(
            {**dict(flux.vae.config), "mid_block_add_attention": False}
        )
    return FluxKontextPipeline(**parts)


def write_tiny_kontext(dest: Path, *, seed: int = 0) -> Path:
    """Save `build_tiny_kontext(...)` as a diffusers folder at `dest`."""
    pipe = build_tiny_kontext(seed=seed)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest
