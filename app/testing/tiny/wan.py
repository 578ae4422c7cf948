"""A tiny random Wan 2.1 text-to-video pipeline, for tests and benchmarks.

The components and folder layout of Wan-AI/Wan2.1-T2V-1.3B-Diffusers, each a few thousand
parameters: a `WanTransformer3DModel` of one block on (1, 2, 2) patches, the Wan VAE
(`AutoencoderKLWan`: 16 latent channels, 4x in time, 8x in space, its latents' mean and
standard deviation), a two-layer UMT5 encoder with the tiny T5 unigram tokenizer of
`tiny.unet` (built in memory: nothing is downloaded), and the flow-matching Euler
scheduler with Wan's shift. Saved with `save_pretrained`, the folder loads as a
`WanPipeline` from disk alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.testing.tiny.unet import tiny_t5_tokenizer

TEXT_WIDTH = 32  # the tiny UMT5's d_model: the transformer's text_dim
LATENT_CHANNELS = 16  # the Wan VAE's z_dim, as released
# Easel's "Euler" on Wan: the flow-matching Euler scheduler with Wan 2.1's shift (the
# released folders' `flow_shift` of 3.0 for 480p).
# Wan-AI/Wan2.1-T2V-1.3B-Diffusers, scheduler/scheduler_config.json: what the released
# folders ship (UniPC on flow sigmas), and so what the stock pipeline runs by default.
RELEASED_SCHEDULER = {
    "num_train_timesteps": 1000,
    "prediction_type": "flow_prediction",
    "use_flow_sigmas": True,
    "flow_shift": 3.0,
    "solver_order": 2,
    "solver_type": "bh2",
    "predict_x0": True,
    "lower_order_final": True,
    "final_sigmas_type": "zero",
    "timestep_spacing": "linspace",
}
WAN22_BOUNDARY_RATIO = 0.875  # Wan-AI/Wan2.2-T2V-A14B-Diffusers, model_index.json
WAN_SCHEDULER = {"num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": False}


def tiny_umt5_encoder(*, d_model: int = TEXT_WIDTH, seed: int = 0) -> Any:
    """A two-layer UMT5 encoder (gated GELU, per-layer relative positions) of the tiny T5
    tokenizer's vocabulary, as Wan's `text_encoder` (umt5-xxl) is shaped."""
    import torch
    from transformers import UMT5Config, UMT5EncoderModel

    config = UMT5Config(
        vocab_size=len(tiny_t5_tokenizer()),
        d_model=d_model,
        d_kv=8,
        d_ff=37,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        relative_attention_num_buckets=8,
        pad_token_id=0,
        eos_token_id=1,
    )
    with torch.random.fork_rng():  # the caller's random stream stays untouched
        torch.manual_seed(seed)
        return UMT5EncoderModel(config).eval()


def build_tiny_wan(
    *, seed: int = 0, experts: bool = False, released: bool = False, layers: int = 1
) -> Any:
    """A tiny `WanPipeline` (Wan 2.1 text to video); with `experts`, Wan 2.2 A14B's shape:
    a high-noise `transformer` and a low-noise `transformer_2`, switched at the released
    boundary ratio (0.875 of the training timesteps); with `released`, the released folders'
    UniPC scheduler instead of Euler. `layers`: the DiT's blocks (First Block Cache needs
    two: a first block to measure and the others to skip)."""
    import torch
    from diffusers import (
        AutoencoderKLWan,
        FlowMatchEulerDiscreteScheduler,
        UniPCMultistepScheduler,
        WanPipeline,
        WanTransformer3DModel,
    )

    def dit() -> Any:
        return WanTransformer3DModel(
            patch_size=(1, 2, 2),
            num_attention_heads=2,
            attention_head_dim=12,
            in_channels=LATENT_CHANNELS,
            out_channels=LATENT_CHANNELS,
            text_dim=TEXT_WIDTH,
            freq_dim=32,
            ffn_dim=32,
            num_layers=layers,
            cross_attn_norm=True,
            qk_norm="rms_norm_across_heads",
            rope_max_seq_len=32,
        )

    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        transformer = dit()
        transformer_2 = dit() if experts else None
        vae = AutoencoderKLWan(
            base_dim=3,
            z_dim=LATENT_CHANNELS,
            dim_mult=[1, 1, 1, 1],
            num_res_blocks=1,
            temperal_downsample=[False, True, True],
        )
    return WanPipeline(
        tokenizer=tiny_t5_tokenizer(),
        text_encoder=tiny_umt5_encoder(seed=seed + 1),
        transformer=transformer,
        vae=vae,
        scheduler=UniPCMultistepScheduler(**RELEASED_SCHEDULER)
        if released
        else FlowMatchEulerDiscreteScheduler(**WAN_SCHEDULER),
        transformer_2=transformer_2,
        boundary_ratio=WAN22_BOUNDARY_RATIO if experts else None,
    )


def write_tiny_wan(
    dest: Path, *, seed: int = 0, experts: bool = False, released: bool = False, layers: int = 1
) -> Path:
    """Save `build_tiny_wan(...)` as a diffusers folder at `dest`."""
    pipe = build_tiny_wan(seed=seed, experts=experts, released=released, layers=layers)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest
