"""A tiny, randomly initialised Qwen-Image pipeline, for tests and benchmarks.

The components and folder layout of Qwen/Qwen-Image (what `save_pretrained` writes), shrunk:
- a `QwenImageTransformer2DModel` (MMDiT: two dual-stream blocks, 2x2 patches of the
  16-channel latents, 3-axis RoPE), its text width the text encoder's;
- a two-layer Qwen2.5-VL text encoder (`Qwen2_5_VLForConditionalGeneration`, as the released
  folder's `text_encoder`, with a one-block vision tower the text path never runs) and a
  byte-level BPE tokenizer built here (every byte a token, no merges) with Qwen's chat and
  vision tokens, so the stock `_get_qwen_prompt_embeds` reads its template as it does;
- an `AutoencoderKLQwenImage` (the Wan 2.1-style causal 3D VAE Qwen-Image ships, 8x spatial
  compression) with random `latents_mean`/`latents_std`, so its normalisation shows;
- the flow-matching Euler scheduler with the released config (a dynamic, exponential shift
  and a terminal shift).
The weights are perturbed after construction so that no block starts at zero (the
modulation and final layers would otherwise make every prompt look alike).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from app.testing.tiny.zimage import CHAT_TEMPLATE
from app.testing.tiny.zimage import SPECIAL_TOKENS as QWEN3_TOKENS

TEXT_WIDTH = 32  # the tiny Qwen2.5-VL's hidden size: the transformer's joint_attention_dim
LATENT_CHANNELS = 16  # Qwen-Image's VAE z_dim; the transformer sees 2x2 patches (64)
# Qwen/Qwen-Image, scheduler/scheduler_config.json.
QWEN_SCHEDULER = {
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "max_image_seq_len": 8192,
    "max_shift": 0.9,
    "num_train_timesteps": 1000,
    "shift": 1.0,
    "shift_terminal": 0.02,
    "time_shift_type": "exponential",
    "use_dynamic_shifting": True,
}
# Qwen2.5-VL's vision tokens (the Edit pipelines write them around each input image).
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")


def tiny_qwen25_tokenizer() -> Any:
    """A Qwen2-style byte-level BPE tokenizer: the 256 byte symbols, no merges, Qwen's chat
    and vision tokens, `<|endoftext|>` as padding (as the released one), built in memory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import Qwen2Tokenizer

    vocab = {symbol: index for index, symbol in enumerate(sorted(ByteLevel.alphabet()))}
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bpe.decoder = decoders.ByteLevel()
    bpe.add_special_tokens([*QWEN3_TOKENS, *VISION_TOKENS])
    return Qwen2Tokenizer(
        tokenizer_object=bpe,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        chat_template=CHAT_TEMPLATE,
    )


def tiny_qwen25_vl(tokenizer: Any) -> Any:
    """A two-layer `Qwen2_5_VLForConditionalGeneration` reading `tokenizer`'s ids."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in VISION_TOKENS}
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": TEXT_WIDTH,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 1024,
            "bos_token_id": tokenizer.convert_tokens_to_ids("<|endoftext|>"),
            "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
            # Multimodal RoPE: (time, height, width) sections of the head's 8 frequencies.
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e6,
                "mrope_section": [2, 3, 3],
            },
        },
        vision_config={
            "depth": 1,
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_heads": 2,
            "out_hidden_size": TEXT_WIDTH,
            "fullatt_block_indexes": [0],
        },
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
    )
    return Qwen2_5_VLForConditionalGeneration(config).eval()


def tiny_qwen_vae() -> Any:
    """`AutoencoderKLQwenImage` with 8x spatial compression, tiny, its latents' mean and
    standard deviation random (the released ones are per channel too)."""
    import torch
    from diffusers import AutoencoderKLQwenImage

    mean = (torch.randn(LATENT_CHANNELS) * 0.5).tolist()
    std = (torch.rand(LATENT_CHANNELS) + 0.5).tolist()
    return AutoencoderKLQwenImage(
        base_dim=8,
        z_dim=LATENT_CHANNELS,
        dim_mult=[1, 2, 2, 2],
        num_res_blocks=1,
        temperal_downsample=[False, True, True],
        latents_mean=[round(value, 4) for value in mean],
        latents_std=[round(value, 4) for value in std],
    )


def build_tiny_qwen(*, seed: int = 0) -> Any:
    """A `QwenImagePipeline` of tiny random components."""
    import torch
    from diffusers import (
        FlowMatchEulerDiscreteScheduler,
        QwenImagePipeline,
        QwenImageTransformer2DModel,
    )

    tokenizer = tiny_qwen25_tokenizer()
    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        transformer = QwenImageTransformer2DModel(
            patch_size=2,
            in_channels=LATENT_CHANNELS * 4,
            out_channels=LATENT_CHANNELS,
            num_layers=2,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=TEXT_WIDTH,
            axes_dims_rope=(4, 6, 6),  # the head width (16), split as the released 16/56/56
        )
        with torch.no_grad():
            for parameter in cast(torch.nn.Module, transformer).parameters():
                parameter.add_(torch.randn_like(parameter) * 0.05)
        text_encoder = tiny_qwen25_vl(tokenizer)
        vae = tiny_qwen_vae()
    return QwenImagePipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(**QWEN_SCHEDULER),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        transformer=transformer,
    )


def write_tiny_qwen(dest: Path, *, seed: int = 0) -> Path:
    """`build_tiny_qwen` saved as a diffusers folder at `dest`."""
    pipe = build_tiny_qwen(seed=seed)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest


def write_tiny_qwen_lora(dest: Path, *, seed: int = 1) -> Path:
    """A random LoRA (rank 4, the transformer's attention, as Qwen-Image's Lightning LoRAs
    target) for `build_tiny_qwen()`, saved in diffusers' Qwen-Image LoRA format as `dest`."""
    import torch
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    pipe = build_tiny_qwen()
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


def build_tiny_qwen_edit(*, seed: int = 0, plus: bool = False) -> Any:
    """A `QwenImageEditPipeline` of `build_tiny_qwen`'s components and a processor of the
    released one's image settings (Qwen2.5-VL's 14-pixel patches merged 2x2) and the tiny
    tokenizer, built as `families/qwen/processor.py` builds it without torchvision."""
    from diffusers import QwenImageEditPipeline, QwenImageEditPlusPipeline
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from app.engine.generation.families.qwen.processor import ImageOnlyQwen2VLProcessor

    base = build_tiny_qwen(seed=seed)
    processor = ImageOnlyQwen2VLProcessor(
        image_processor=Qwen2VLImageProcessorPil(), tokenizer=base.tokenizer
    )
    pipeline_class = QwenImageEditPlusPipeline if plus else QwenImageEditPipeline
    return pipeline_class(
        scheduler=base.scheduler,
        vae=base.vae,
        text_encoder=base.text_encoder,
        tokenizer=base.tokenizer,
        processor=processor,
        transformer=base.transformer,
    )


def write_tiny_qwen_edit(dest: Path, *, seed: int = 0, plus: bool = False) -> Path:
    """`build_tiny_qwen_edit` (`plus`: a `QwenImageEditPlusPipeline`) saved as a diffusers
    folder at `dest`, its processor named as the released folder names it
    (`Qwen2VLProcessor`), not by the class that built it."""
    import json

    pipe = build_tiny_qwen_edit(seed=seed, plus=plus)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    index_path = dest / "model_index.json"
    index = json.loads(index_path.read_text(encoding="utf-8"))
    index["processor"] = ["transformers", "Qwen2VLProcessor"]
    index_path.write_text(json.dumps(index, indent=2), encoding="utf-8")
    config_path = dest / "processor" / "processor_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["processor_class"] = "Qwen2VLProcessor"
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return dest
