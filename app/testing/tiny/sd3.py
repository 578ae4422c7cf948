"""A tiny, randomly initialised Stable Diffusion 3.x pipeline, for tests and benchmarks.

The components and folder layout of SD 3.5 (what `save_pretrained` writes), shrunk:
- an MMDiT (`SD3Transformer2DModel`, two joint blocks) shaped as SD 3.5 medium by default
  (dual attention in the first block, RMS-normed queries and keys; `VARIANTS`: the others);
- two CLIP text encoders with projections in the roles of CLIP-L (quick GELU) and CLIP-G
  (GELU, wider), and the tiny T5 v1.1 encoder as the third;
- a 16-channel VAE with SD3's scaling and shift factors and no quant convolutions;
- the flow-matching Euler scheduler with SD3's shift of 3.
The widths keep SD3's arithmetic: the CLIP hidden states side by side (32 + 48) are padded
to T5's width (96), the pooled projections side by side (32 + 48) are the transformer's
pooled input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.testing.tiny.unet import (
    _text_config,
    _tokenizer,
    tiny_flow_vae,
    tiny_t5_encoder,
    tiny_t5_tokenizer,
)

CLIP_L_WIDTH, CLIP_G_WIDTH, T5_WIDTH = 32, 48, 96
SD3_SHIFT = 3.0  # the released SD 3 / 3.5 schedulers' shift
SD3_SCALING_FACTOR, SD3_SHIFT_FACTOR = 1.5305, 0.0609  # the released SD 3.x VAE's
LATENT_SIZE = 8  # the transformer's sample_size: a native 64 px image
# What tells the released transformers apart where the loop looks: SD 3.5 medium has dual
# attention (MMDiT-X) in its first blocks and RMS-normed queries and keys, SD 3.5 large
# (and large turbo, the same network distilled) the norms only, SD 3 medium neither.
VARIANTS: dict[str, dict[str, Any]] = {
    "3.5-medium": {"dual_attention_layers": (0,), "qk_norm": "rms_norm"},
    "3.5-large": {"dual_attention_layers": (), "qk_norm": "rms_norm"},
    "3-medium": {"dual_attention_layers": (), "qk_norm": None},
}


def build_tiny_sd3(*, seed: int = 0, with_t5: bool = True, variant: str = "3.5-medium") -> Any:
    """A StableDiffusion3Pipeline of tiny random components, its transformer shaped as
    `variant`'s (`VARIANTS`); without T5 as the stock pipeline allows
    (`text_encoder_3=None`: the T5 part of the prompt is zeros)."""
    import torch
    from diffusers import (
        FlowMatchEulerDiscreteScheduler,
        SD3Transformer2DModel,
        StableDiffusion3Pipeline,
    )
    from transformers import CLIPTextModelWithProjection

    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        transformer = SD3Transformer2DModel(
            sample_size=LATENT_SIZE,
            patch_size=2,
            in_channels=16,
            out_channels=16,
            num_layers=2,
            attention_head_dim=8,
            num_attention_heads=4,
            joint_attention_dim=T5_WIDTH,
            caption_projection_dim=32,  # = heads x head width, as in every released SD3
            pooled_projection_dim=CLIP_L_WIDTH + CLIP_G_WIDTH,
            pos_embed_max_size=4 * LATENT_SIZE // 2,  # up to 4x the native side
            **VARIANTS[variant],
        )
        vae = tiny_flow_vae(scaling_factor=SD3_SCALING_FACTOR, shift_factor=SD3_SHIFT_FACTOR)
        clip_l = CLIPTextModelWithProjection(
            _text_config(hidden_size=CLIP_L_WIDTH, projection_dim=CLIP_L_WIDTH)
        )
        clip_g = CLIPTextModelWithProjection(
            _text_config(v2=True, hidden_size=CLIP_G_WIDTH, projection_dim=CLIP_G_WIDTH)
        )
        t5 = tiny_t5_encoder(d_model=T5_WIDTH, seed=seed) if with_t5 else None
    return StableDiffusion3Pipeline(
        transformer=transformer,
        scheduler=FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=SD3_SHIFT),
        vae=vae,
        text_encoder=clip_l.eval(),
        tokenizer=_tokenizer(),
        text_encoder_2=clip_g.eval(),
        tokenizer_2=_tokenizer(),
        text_encoder_3=t5,
        tokenizer_3=tiny_t5_tokenizer() if with_t5 else None,
    )


def write_tiny_sd3(
    dest: Path, *, seed: int = 0, with_t5: bool = True, variant: str = "3.5-medium"
) -> Path:
    """`build_tiny_sd3` saved as a diffusers folder at `dest`."""
    pipe = build_tiny_sd3(seed=seed, with_t5=with_t5, variant=variant)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest


def write_tiny_sd3_lora(dest: Path, *, seed: int = 1) -> Path:
    """A random LoRA (rank 4) for `build_tiny_sd3`'s transformer (its joint attention, both
    streams) and both CLIP encoders, saved in diffusers' SD3 LoRA format as `dest` (a
    .safetensors file), as `StableDiffusion3Pipeline.save_lora_weights` writes it."""
    import torch
    from diffusers import StableDiffusion3Pipeline
    from peft import LoraConfig, inject_adapter_in_model
    from peft.utils import get_peft_model_state_dict

    pipe = build_tiny_sd3(with_t5=False)
    transformer_targets = ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj",
                           "add_v_proj", "to_add_out"]  # fmt: skip
    text_targets = ["q_proj", "k_proj", "v_proj", "out_proj"]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        # init_lora_weights=False: random A and B, so the LoRA visibly changes the image.
        pipe.transformer.add_adapter(
            LoraConfig(r=4, target_modules=transformer_targets, init_lora_weights=False)
        )
        layers: dict[str, Any] = {
            "transformer_lora_layers": get_peft_model_state_dict(pipe.transformer)
        }
        for name in ("text_encoder", "text_encoder_2"):
            encoder = getattr(pipe, name)
            config = LoraConfig(r=4, target_modules=text_targets, init_lora_weights=False)
            inject_adapter_in_model(config, encoder)
            layers[f"{name}_lora_layers"] = get_peft_model_state_dict(encoder)
    dest.parent.mkdir(parents=True, exist_ok=True)
    StableDiffusion3Pipeline.save_lora_weights(dest.parent, weight_name=dest.name, **layers)
    return dest
