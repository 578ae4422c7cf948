"""Tiny random Wan pipelines, for tests and benchmarks: Wan 2.1 text to video (below),
Wan 2.2 TI2V 5B (`build_tiny_wan_ti2v`) and Wan 2.1 I2V (`build_tiny_wan_i2v`).

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


def tiny_umt5_encoder(*, d_model: int = TEXT_WIDTH, seed: int = 0, vocab_size: int = 0) -> Any:
    """A two-layer UMT5 encoder (gated GELU, per-layer relative positions) of the tiny T5
    tokenizer's vocabulary (or `vocab_size` tokens), as Wan's `text_encoder` (umt5-xxl)."""
    import torch
    from transformers import UMT5Config, UMT5EncoderModel

    config = UMT5Config(
        vocab_size=vocab_size or len(tiny_t5_tokenizer()),
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


TI2V_LATENT_CHANNELS = 48  # Wan 2.2's VAE: 48 channels of 2x2-patchified pixels
TI2V_SPATIAL = 16  # its VAE's 16x in space (8x and a 2x2 pixel patch)
# Wan-AI/Wan2.2-TI2V-5B-Diffusers, scheduler/scheduler_config.json: UniPC on flow sigmas
# with a shift of 5.0 (its 704p clips).
TI2V_RELEASED_SCHEDULER = {**RELEASED_SCHEDULER, "flow_shift": 5.0}


def _tiny_dit(
    in_channels: int,
    out_channels: int,
    image_dim: int | None = None,
    layers: int = 1,
    pos_embed_seq_len: int | None = None,
) -> Any:
    from diffusers import WanTransformer3DModel

    return WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=2,
        attention_head_dim=12,
        in_channels=in_channels,
        out_channels=out_channels,
        text_dim=TEXT_WIDTH,
        freq_dim=32,
        ffn_dim=32,
        num_layers=layers,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        rope_max_seq_len=32,
        image_dim=image_dim,
        pos_embed_seq_len=pos_embed_seq_len,
    )


def _spread(count: int, low: float, high: float) -> list[float]:
    """`count` values evenly from `low` to `high`: latents' means and deviations that
    differ per channel, as the released ones do (a mix-up of channels shows)."""
    return [low + (high - low) * index / (count - 1) for index in range(count)]


def build_tiny_wan_ti2v(*, seed: int = 0, released: bool = False, layers: int = 1) -> Any:
    """A tiny Wan 2.2 TI2V 5B, as its diffusers folder is made: a `WanPipeline` whose
    model index says `expand_timesteps` (a timestep per latent patch, so that the first
    latent frame can be an input image's, at timestep 0), a 48-channel DiT of `layers`
    blocks (First Block Cache needs two) and Wan 2.2's VAE (residual, 2x2 pixel patches:
    16x in space, 4x in time)."""
    import torch
    from diffusers import (
        AutoencoderKLWan,
        FlowMatchEulerDiscreteScheduler,
        UniPCMultistepScheduler,
        WanPipeline,
    )

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        transformer = _tiny_dit(TI2V_LATENT_CHANNELS, TI2V_LATENT_CHANNELS, layers=layers)
        vae = AutoencoderKLWan(
            base_dim=12,
            z_dim=TI2V_LATENT_CHANNELS,
            in_channels=12,
            out_channels=12,
            is_residual=True,
            patch_size=2,
            dim_mult=[1, 1, 1, 1],
            num_res_blocks=1,
            temperal_downsample=[False, True, True],
            scale_factor_spatial=TI2V_SPATIAL,
            latents_mean=_spread(TI2V_LATENT_CHANNELS, -0.3, 0.3),
            latents_std=_spread(TI2V_LATENT_CHANNELS, 0.5, 1.5),
        )
    return WanPipeline(
        tokenizer=tiny_t5_tokenizer(),
        text_encoder=tiny_umt5_encoder(seed=seed + 1),
        transformer=transformer,
        vae=vae,
        scheduler=UniPCMultistepScheduler(**TI2V_RELEASED_SCHEDULER)
        if released
        else FlowMatchEulerDiscreteScheduler(**WAN_SCHEDULER),
        expand_timesteps=True,
    )


def write_tiny_wan_ti2v(
    dest: Path, *, seed: int = 0, released: bool = False, layers: int = 1
) -> Path:
    """Save `build_tiny_wan_ti2v(...)` as a diffusers folder at `dest`."""
    pipe = build_tiny_wan_ti2v(seed=seed, released=released, layers=layers)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest


I2V_IMAGE_SIZE = 32  # the tiny CLIP vision encoder's input side
I2V_IMAGE_WIDTH = 4  # its hidden width: the transformer's image_dim
# FLF2V: the positions of two images' CLIP states (32x32 patches of 1 pixel and the class
# token each; the released 14B's 2 x 257).
FLF2V_POSITIONS = 2 * (I2V_IMAGE_SIZE**2 + 1)


def tiny_clip_vision(*, seed: int = 0) -> tuple[Any, Any]:
    """Wan 2.1 I2V's image encoder and processor, tiny: a two-layer `CLIPVisionModel`
    (the class the stock pipeline declares; open-clip ViT-H/14 as released) on 32-pixel
    images and its `CLIPImageProcessor`, both built in memory (nothing downloaded)."""
    import torch
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

    config = CLIPVisionConfig(
        hidden_size=I2V_IMAGE_WIDTH,
        projection_dim=I2V_IMAGE_WIDTH,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=I2V_IMAGE_SIZE,
        intermediate_size=16,
        patch_size=1,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        encoder = CLIPVisionModel(config).eval()
    return encoder, CLIPImageProcessor(crop_size=I2V_IMAGE_SIZE, size=I2V_IMAGE_SIZE)


def build_tiny_wan_i2v(
    *, seed: int = 0, experts: bool = False, layers: int = 1, last_frame: bool = False
) -> Any:
    """A tiny Wan 2.1 I2V (`WanImageToVideoPipeline`): its DiT reads the noise (16
    channels), the 4 mask channels and the input image's 16 latent channels (36 in), and
    the CLIP image encoder's penultimate states beside the prompt's. With `experts`, Wan 2.2
    I2V A14B's shape: a high- and a low-noise DiT switched at the boundary ratio, no CLIP.
    `layers`: each DiT's blocks (First Block Cache needs two). With `last_frame`, Wan 2.1
    FLF2V's shape: CLIP positions for a first and a last image (random, so they count)."""
    import torch
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanImageToVideoPipeline

    in_channels = 2 * LATENT_CHANNELS + 4
    image_dim = None if experts else I2V_IMAGE_WIDTH
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        positions = FLF2V_POSITIONS if last_frame else None
        transformer = _tiny_dit(in_channels, LATENT_CHANNELS, image_dim, layers, positions)
        if last_frame:
            transformer.condition_embedder.image_embedder.pos_embed.data.normal_(std=0.5)
        transformer_2 = _tiny_dit(in_channels, LATENT_CHANNELS, layers=layers) if experts else None
        vae = AutoencoderKLWan(
            base_dim=3,
            z_dim=LATENT_CHANNELS,
            dim_mult=[1, 1, 1, 1],
            num_res_blocks=1,
            temperal_downsample=[False, True, True],
        )
    image_encoder, image_processor = (None, None) if experts else tiny_clip_vision(seed=seed + 2)
    return WanImageToVideoPipeline(
        tokenizer=tiny_t5_tokenizer(),
        text_encoder=tiny_umt5_encoder(seed=seed + 1),
        image_encoder=image_encoder,
        image_processor=image_processor,
        transformer=transformer,
        vae=vae,
        scheduler=FlowMatchEulerDiscreteScheduler(**WAN_SCHEDULER),
        transformer_2=transformer_2,
        boundary_ratio=WAN22_BOUNDARY_RATIO if experts else None,
    )


def write_tiny_wan_i2v(
    dest: Path, *, seed: int = 0, experts: bool = False, layers: int = 1, last_frame: bool = False
) -> Path:
    """Save `build_tiny_wan_i2v(...)` as a diffusers folder at `dest`."""
    pipe = build_tiny_wan_i2v(seed=seed, experts=experts, layers=layers, last_frame=last_frame)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest
