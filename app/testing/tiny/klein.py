"""A tiny random Flux.2 Klein pipeline (base or step-distilled), for tests and benchmarks.

The same components as the released FLUX.2-klein folders, each tiny: a `Qwen3ForCausalLM`
text encoder of 27 layers (the pipeline stacks the hidden states after layers 9, 18 and
27) and 16 wide, a byte-level BPE tokenizer built here (every byte a token, no merges) with
Qwen's special tokens and a chat template that renders as Qwen3's does with
`enable_thinking=False`, a `Flux2Transformer2DModel` of one double and one single block
without a guidance embedder (Klein has none), an `AutoencoderKLFlux2` whose batch-norm
statistics are random (so its latent normalisation is visible in the image), and the
flow-matching Euler scheduler with the released dynamic shift. Saved with
`save_pretrained`, the folder loads as a `Flux2KleinPipeline` from disk alone;
`is_distilled` goes into its model_index.json as in the released distilled folders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# scheduler/scheduler_config.json of the FLUX.2-klein folders (a dynamic shift; the
# pipeline computes its own mu, `compute_empirical_mu`).
KLEIN_SCHEDULER = {
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "max_image_seq_len": 4096,
    "max_shift": 1.15,
    "num_train_timesteps": 1000,
    "shift": 3.0,
    "time_shift_type": "exponential",
    "use_dynamic_shifting": True,
}
QWEN_WIDTH = 16  # the tiny Qwen3's hidden size; the transformer reads 3 layers of it
QWEN_LAYERS = 27  # the pipeline reads hidden_states[9], [18] and [27]
LATENT_CHANNELS = 8  # the tiny VAE's; the transformer sees 2x2 patches of them (32)
# Qwen3's special tokens that its chat template writes (and its pad token, <|endoftext|>).
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")
# Qwen3's chat template, cut down to what the pipeline asks of it (one user message, a
# generation prompt, thinking disabled: the empty think block).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)


def tiny_qwen_tokenizer() -> Any:
    """A byte-level BPE tokenizer (each of the 256 bytes a token), Qwen2's fast class."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import Qwen2TokenizerFast  # type: ignore[attr-defined]

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {char: index for index, char in enumerate(sorted(alphabet))}
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bpe.decoder = decoders.ByteLevel()
    bpe.add_special_tokens(list(SPECIAL_TOKENS))
    return Qwen2TokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=131072,
    )


def build_tiny_klein(*, is_distilled: bool = False, seed: int = 0) -> Any:
    """A tiny `Flux2KleinPipeline`: the base model (true CFG), or step-distilled."""
    import torch
    from diffusers import (
        AutoencoderKLFlux2,
        FlowMatchEulerDiscreteScheduler,
        Flux2KleinPipeline,
        Flux2Transformer2DModel,
    )
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = tiny_qwen_tokenizer()
    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        text_encoder = Qwen3ForCausalLM(
            Qwen3Config(
                vocab_size=len(tokenizer),
                hidden_size=QWEN_WIDTH,
                intermediate_size=32,
                num_hidden_layers=QWEN_LAYERS,
                num_attention_heads=2,
                num_key_value_heads=1,
                head_dim=8,
                max_position_embeddings=1024,
                tie_word_embeddings=True,
            )
        ).eval()
        transformer = Flux2Transformer2DModel(
            patch_size=1,
            in_channels=LATENT_CHANNELS * 4,  # 2x2 patches of the latents
            num_layers=1,
            num_single_layers=1,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=3 * QWEN_WIDTH,  # three hidden-state layers, side by side
            timestep_guidance_channels=32,
            axes_dims_rope=(4, 4, 4, 4),  # sums to attention_head_dim, as (32,)*4 to 128
            guidance_embeds=False,
        )
        vae: Any = AutoencoderKLFlux2(
            latent_channels=LATENT_CHANNELS,
            block_out_channels=(8, 16, 16, 16),
            norm_num_groups=8,
            layers_per_block=1,
            sample_size=64,
        )
        # The released VAE's batch norm holds statistics of real latents; random ones here.
        vae.bn.running_mean.copy_(torch.randn(LATENT_CHANNELS * 4) * 0.5)
        vae.bn.running_var.copy_(torch.rand(LATENT_CHANNELS * 4) + 0.5)
        vae.eval()
    return Flux2KleinPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(**KLEIN_SCHEDULER),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        transformer=transformer,
        is_distilled=is_distilled,
    )


def write_tiny_klein(dest: Path, *, is_distilled: bool = False, seed: int = 0) -> Path:
    """Save `build_tiny_klein(...)` as a diffusers folder at `dest`."""
    pipe = build_tiny_klein(is_distilled=is_distilled, seed=seed)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest


def write_tiny_klein_lora(dest: Path, *, is_distilled: bool = False, seed: int = 1) -> Path:
    """A random LoRA (rank 4, the transformer's attention) for
    `build_tiny_klein(is_distilled=...)`, saved in diffusers' Flux.2 LoRA format as `dest`."""
    import torch
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    pipe = build_tiny_klein(is_distilled=is_distilled)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        # init_lora_weights=False: random A and B, so the LoRA visibly changes the image.
        targets = ["to_q", "to_k", "to_v", "add_q_proj", "add_k_proj", "add_v_proj"]
        pipe.transformer.add_adapter(
            LoraConfig(r=4, target_modules=targets, init_lora_weights=False)
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    type(pipe).save_lora_weights(
        dest.parent,
        weight_name=dest.name,
        transformer_lora_layers=get_peft_model_state_dict(pipe.transformer),
    )
    return dest
