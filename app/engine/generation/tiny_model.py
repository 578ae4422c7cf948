"""A tiny, randomly initialised Stable Diffusion pipeline for tests and benchmarks.

Real components with the real folder layout (what `save_pretrained` writes), but about
300k parameters in all, so the whole generation path runs in milliseconds on a CPU
without the trained bundled model and without any download.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Single characters plus their end-of-word forms: enough for CLIP's BPE to tokenize any
# lowercase prompt (other characters become the unknown token, <|endoftext|>).
_SPECIAL = ("<|startoftext|>", "<|endoftext|>")
_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789,.!?'-"
_MERGES = ("t h", "th e</w>", "a n", "an d</w>", "c a", "ca t</w>")


def _tokenizer_vocab() -> dict[str, int]:
    tokens = [*_CHARS, *(c + "</w>" for c in _CHARS)]
    tokens += [m.replace(" ", "") for m in _MERGES]
    tokens += list(_SPECIAL)
    return {token: index for index, token in enumerate(dict.fromkeys(tokens))}


def write_tiny_pipeline(dest: Path, *, seed: int = 0) -> Path:
    """Save a tiny SD-layout pipeline (UNet, VAE, CLIP text encoder, tokenizer) into `dest`."""
    import torch

    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        pipe = _build()
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest


def _build() -> Any:
    from diffusers import (
        AutoencoderKL,
        EulerDiscreteScheduler,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    vocab = _tokenizer_vocab()
    text_config = CLIPTextConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=37,
        num_attention_heads=4,
        num_hidden_layers=2,
        max_position_embeddings=77,
        bos_token_id=vocab[_SPECIAL[0]],
        eos_token_id=vocab[_SPECIAL[1]],
        pad_token_id=vocab[_SPECIAL[1]],
    )
    unet = UNet2DConditionModel(
        sample_size=8,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(16, 32),
        norm_num_groups=8,
        cross_attention_dim=32,
        attention_head_dim=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    )
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        block_out_channels=(8, 16, 16, 16),
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        norm_num_groups=8,
        layers_per_block=1,
        sample_size=64,
    )
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        num_train_timesteps=1000,
        steps_offset=1,
    )
    merges: Any = [tuple(m.split()) for m in _MERGES]  # the tokenizers backend wants pairs
    tokenizer = CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=77)
    pipe = StableDiffusionPipeline(
        vae=vae,
        text_encoder=CLIPTextModel(text_config),
        tokenizer=tokenizer,
        unet=unet,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    return pipe
