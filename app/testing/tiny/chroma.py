"""A tiny random Chroma pipeline, for tests and benchmarks.

The same components as the released Chroma folders (lodestones/Chroma1-HD), each a few
thousand parameters: a `ChromaTransformer2DModel` of one double and one single block (its
modulation approximator two layers deep), the tiny T5 v1.1-style encoder and unigram
tokenizer of `tiny.unet`, Flux.1's 16-channel VAE and a `FlowMatchEulerDiscreteScheduler`
with the released config (Flux.1-dev's dynamic shift). No CLIP: Chroma reads T5 alone.
Saved with `save_pretrained`, the folder loads as a `ChromaPipeline` from disk alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.testing.tiny.flux import (
    DEV_SCHEDULER,
    FLUX_LATENT_CHANNELS,
    FLUX_SCALING_FACTOR,
    FLUX_SHIFT_FACTOR,
    T5_WIDTH,
)
from app.testing.tiny.unet import tiny_flow_vae, tiny_t5_encoder, tiny_t5_tokenizer


def build_tiny_chroma(*, seed: int = 0) -> Any:
    """A tiny `ChromaPipeline`."""
    import torch
    from diffusers import ChromaPipeline, ChromaTransformer2DModel, FlowMatchEulerDiscreteScheduler

    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        transformer = ChromaTransformer2DModel(
            patch_size=1,
            in_channels=FLUX_LATENT_CHANNELS * 4,  # 2x2 patches of the latents, packed
            num_layers=1,
            num_single_layers=1,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=T5_WIDTH,
            axes_dims_rope=(4, 6, 6),  # sums to attention_head_dim, as (16, 56, 56) to 128
            approximator_num_channels=8,
            approximator_hidden_dim=32,
            approximator_layers=2,
        )
        vae = tiny_flow_vae(scaling_factor=FLUX_SCALING_FACTOR, shift_factor=FLUX_SHIFT_FACTOR)
        text_encoder = tiny_t5_encoder(d_model=T5_WIDTH, seed=seed + 1)
    return ChromaPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(**DEV_SCHEDULER),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tiny_t5_tokenizer(),
        transformer=transformer,
    )


def write_tiny_chroma(dest: Path, *, seed: int = 0) -> Path:
    """Save `build_tiny_chroma(...)` as a diffusers folder at `dest`."""
    pipe = build_tiny_chroma(seed=seed)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest
