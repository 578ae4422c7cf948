"""A tiny, randomly initialised Z-Image pipeline, for tests and benchmarks.

The components and folder layout of Tongyi-MAI/Z-Image-Turbo (what `save_pretrained`
writes), shrunk:
- a `ZImageTransformer2DModel` (single-stream DiT: one noise-refiner, one context-refiner
  and two main blocks, 2x2 patches, 3-axis RoPE), its caption width the text encoder's;
- a two-layer Qwen3 text encoder (`Qwen3Model`, as the released folder's `text_encoder`)
  with a byte-level BPE tokenizer built here (every byte a token, no merges) that has the
  released tokenizer's chat tokens and a chat template rendering as Qwen3's does, so the
  stock `_encode_prompt` sees `<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n`;
- the 16-channel VAE of Flux.1 (the one Z-Image ships) with its scaling and shift factors;
- the flow-matching Euler scheduler with the released config (shift 3, no dynamic shift).
The weights are perturbed after construction so that no block starts at zero (the
refiners' and final layers' modulation would otherwise make every prompt look alike).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from app.testing.tiny.unet import tiny_flow_vae

ZIMAGE_SCALING_FACTOR, ZIMAGE_SHIFT_FACTOR = 0.3611, 0.1159  # Flux.1's VAE, as released
TEXT_WIDTH = 32  # the tiny Qwen3's hidden size: the transformer's cap_feat_dim
# Tongyi-MAI/Z-Image-Turbo, scheduler/scheduler_config.json.
ZIMAGE_SCHEDULER = {"num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": False}
# Qwen3's special tokens (the released tokenizer's ids start at 151643; here after the bytes).
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")
# Qwen3's chat template, cut to what a one-message conversation renders: the user's turn,
# then (add_generation_prompt) the assistant's start, and the empty thinking block only
# when thinking is switched off (`enable_thinking=False`), as Qwen3's own template does.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def tiny_qwen_tokenizer() -> Any:
    """A Qwen2-style byte-level BPE tokenizer: the 256 byte symbols, no merges, Qwen3's chat
    tokens, `<|endoftext|>` as padding (as in the released tokenizer), built in memory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import Qwen2Tokenizer

    alphabet = ByteLevel.alphabet()
    vocab = {symbol: index for index, symbol in enumerate(sorted(alphabet))}
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bpe.decoder = decoders.ByteLevel()
    bpe.add_special_tokens(list(SPECIAL_TOKENS))
    return Qwen2Tokenizer(
        tokenizer_object=bpe,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        chat_template=CHAT_TEMPLATE,
    )


def build_tiny_zimage(*, seed: int = 0) -> Any:
    """A `ZImagePipeline` of tiny random components."""
    import torch
    from diffusers import (
        FlowMatchEulerDiscreteScheduler,
        ZImagePipeline,
        ZImageTransformer2DModel,
    )
    from transformers import Qwen3Config, Qwen3Model

    tokenizer = tiny_qwen_tokenizer()
    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        transformer = ZImageTransformer2DModel(
            all_patch_size=(2,),
            all_f_patch_size=(1,),
            in_channels=16,
            dim=32,
            n_layers=2,
            n_refiner_layers=1,
            n_heads=2,
            n_kv_heads=2,
            qk_norm=True,
            cap_feat_dim=TEXT_WIDTH,
            axes_dims=[4, 6, 6],  # the head width (16), split as the released 32/48/48
            axes_lens=[1024, 512, 512],
        )
        with torch.no_grad():
            for parameter in cast(torch.nn.Module, transformer).parameters():
                parameter.add_(torch.randn_like(parameter) * 0.05)
        text_encoder = Qwen3Model(
            Qwen3Config(
                vocab_size=len(tokenizer),
                hidden_size=TEXT_WIDTH,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                num_key_value_heads=1,
                head_dim=16,
                max_position_embeddings=1024,
                tie_word_embeddings=True,
            )
        )
        vae = tiny_flow_vae(scaling_factor=ZIMAGE_SCALING_FACTOR, shift_factor=ZIMAGE_SHIFT_FACTOR)
    return ZImagePipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(**ZIMAGE_SCHEDULER),
        vae=vae,
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        transformer=transformer,
    )


def write_tiny_zimage(dest: Path, *, seed: int = 0) -> Path:
    """`build_tiny_zimage` saved as a diffusers folder at `dest`."""
    pipe = build_tiny_zimage(seed=seed)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest
