"""A tiny random LTX-Video pipeline, for tests and benchmarks.

The components and folder layout of Lightricks/LTX-Video (diffusers), each a few thousand
parameters: an `LTXVideoTransformer3DModel` of one block (`layers`: more) on 1x1x1 patches, an
`AutoencoderKLLTXVideo` compressing as the released one does (4x4 pixel patches, then three
spatio-temporal halvings: 32x in space, 8x in time, so clips of 8k+1 frames at sizes in
multiples of 32) with its decoder conditioned on the decode timestep (LTX-Video 0.9.1 on),
the tiny T5 v1.1-style encoder and unigram tokenizer of `tiny.unet` (built in memory:
nothing is downloaded), and the released flow-matching Euler scheduler (its shift from the
clip's length, `shift_terminal`). Saved with `save_pretrained`, the folder loads as an
`LTXPipeline` (and as an `LTXImageToVideoPipeline`) from disk alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.testing.tiny.unet import tiny_t5_encoder, tiny_t5_tokenizer

TEXT_WIDTH = 32  # the tiny T5's d_model: the transformer's caption_channels
LATENT_CHANNELS = 8  # 128 as released; few here
# Lightricks/LTX-Video, scheduler/scheduler_config.json (diffusers' conversion script's):
# the shift `mu` grows with the clip's tokens, from 0.95 at 1024 to 2.05 at 4096, and the
# sigmas are stretched to end at 0.1 before the final zero.
RELEASED_SCHEDULER = {
    "num_train_timesteps": 1000,
    "shift": 1.0,
    "use_dynamic_shifting": True,
    "base_shift": 0.95,
    "max_shift": 2.05,
    "base_image_seq_len": 1024,
    "max_image_seq_len": 4096,
    "shift_terminal": 0.1,
}


def build_tiny_ltx(*, seed: int = 0, layers: int = 1) -> Any:
    """A tiny `LTXPipeline` (LTX-Video text to video; its components also make an
    `LTXImageToVideoPipeline`); `layers` transformer blocks (step caching needs two)."""
    import torch
    from diffusers import (
        AutoencoderKLLTXVideo,
        FlowMatchEulerDiscreteScheduler,
        LTXPipeline,
        LTXVideoTransformer3DModel,
    )

    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        transformer = LTXVideoTransformer3DModel(
            in_channels=LATENT_CHANNELS,
            out_channels=LATENT_CHANNELS,
            patch_size=1,
            patch_size_t=1,
            num_attention_heads=2,
            attention_head_dim=8,
            cross_attention_dim=16,
            num_layers=layers,
            caption_channels=TEXT_WIDTH,
        )
        vae: Any = AutoencoderKLLTXVideo(
            latent_channels=LATENT_CHANNELS,
            block_out_channels=(8, 8, 8, 8),
            decoder_block_out_channels=(8, 8, 8, 8),
            layers_per_block=(1, 1, 1, 1, 1),
            decoder_layers_per_block=(1, 1, 1, 1, 1),
            spatio_temporal_scaling=(True, True, True, False),
            decoder_spatio_temporal_scaling=(True, True, True, False),
            decoder_inject_noise=(False, False, False, False, False),
            upsample_residual=(False, False, False, False),
            upsample_factor=(1, 1, 1, 1),
            timestep_conditioning=True,
            patch_size=4,
            patch_size_t=1,
        )
        # A mean and spread of its own, as the released VAE's (saved buffers): the
        # pipeline un-normalises the latents by them before decoding.
        vae.latents_mean.copy_(torch.randn(LATENT_CHANNELS) * 0.1)
        vae.latents_std.copy_(torch.rand(LATENT_CHANNELS) + 0.5)
        text_encoder = tiny_t5_encoder(d_model=TEXT_WIDTH, seed=seed + 1)
    return LTXPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(**RELEASED_SCHEDULER),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tiny_t5_tokenizer(),
        transformer=transformer,
    )


def write_tiny_ltx(dest: Path, *, seed: int = 0, layers: int = 1) -> Path:
    """Save `build_tiny_ltx(...)` as a diffusers folder at `dest`."""
    pipe = build_tiny_ltx(seed=seed, layers=layers)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest


# Lightricks/LTX-Video-0.9.5 on: `LTXConditionPipeline` passes its own timesteps (a
# linear-quadratic schedule), which a scheduler with dynamic shifting refuses (no `mu`).
CONDITION_SCHEDULER = {**RELEASED_SCHEDULER, "use_dynamic_shifting": False}


def write_tiny_ltx_condition(dest: Path, *, seed: int = 0, layers: int = 1) -> Path:
    """The tiny LTX-Video as a 0.9.5+ folder: its model index says `LTXConditionPipeline`
    (the same components, the scheduler without dynamic shifting)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, LTXConditionPipeline

    components = build_tiny_ltx(seed=seed, layers=layers).components
    components["scheduler"] = FlowMatchEulerDiscreteScheduler(**CONDITION_SCHEDULER)
    dest.mkdir(parents=True, exist_ok=True)
    pipe: Any = LTXConditionPipeline(**components)
    pipe.save_pretrained(dest)
    return dest
