"""The parts of a Qwen-Image pipeline that diffusers' single-file loaders cannot build from
ComfyUI's split files (load/assemble.py calls these by the family's declaration):

- the Qwen2.5-VL text encoder, in Qwen's released key layout as ComfyUI keeps it
  (`model.` for the language model, `visual.` for the vision tower, no `lm_head`), which
  transformers 5 names `model.language_model.` and `model.visual.`; ComfyUI's fp8_scaled
  file (float8 weights, each with its `scale_weight`) is dequantised as ComfyUI computes it
  (weight x scale), since transformers has no such layout;
- Qwen-Image's VAE (`AutoencoderKLQwenImage`: Wan 2.1's VAE layout, the same module names),
  in Wan-AI's original keys (diffusers' Wan converter) or diffusers' own;
- the tokenizer from the folder `files.find_tokenizer` found, and for Edit and Edit Plus
  the processor: the shipped config folder's image processor settings (those of the
  released `processor/`) on PIL, with that tokenizer (processor.py: no torchvision needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from app.engine.generation.families.qwen.files import TOKENIZER
from app.engine.generation.scaled_fp8 import unscaled_fp8

StateDict = dict[str, torch.Tensor]

_WAN_VAE_MIDDLE = "decoder.middle.0.residual.0.gamma"  # Wan-AI's original VAE keys
PROCESSOR = "processor"
_TRANSFORMERS_5 = ("model.language_model.", "model.visual.")  # already transformers 5's


def text_encoder(weights: StateDict, config: Path, component: str, dtype: torch.dtype) -> Any:
    """`Qwen2_5_VLForConditionalGeneration` of the shipped config, holding `weights`."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, Qwen2_5_VLForConditionalGeneration

    state = transformers_keys(dequantised(weights, dtype))
    # ComfyUI's files leave the language model's head out: the pipelines read the hidden
    # states, never the logits, so the head shares the embedding (as a tied model would).
    state.setdefault("lm_head.weight", state["model.language_model.embed_tokens.weight"])
    settings = AutoConfig.from_pretrained(config / component, local_files_only=True)
    with init_empty_weights(include_buffers=False):
        model = Qwen2_5_VLForConditionalGeneration._from_config(settings, dtype=dtype)
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()


def transformers_keys(weights: StateDict) -> StateDict:
    """Qwen's released Qwen2.5-VL keys -> transformers 5's (keys already so are kept)."""
    renamed = {}
    for key, value in weights.items():
        if key.startswith("visual."):
            key = "model." + key
        elif key.startswith("model.") and not key.startswith(_TRANSFORMERS_5):
            key = "model.language_model." + key.removeprefix("model.")
        renamed[key] = value
    return renamed


def dequantised(weights: StateDict, dtype: torch.dtype) -> StateDict:
    """Every weight in `dtype`: a scaled fp8 weight times its scale (ComfyUI's fp8_scaled
    text encoders, as load/assemble.py's), the others cast."""
    return {key: value.to(dtype) for key, value in unscaled_fp8(weights, dtype).items()}


def vae(weights: StateDict, config: Path, component: str, dtype: torch.dtype) -> Any:
    """`AutoencoderKLQwenImage` of the shipped config holding `weights`."""
    from accelerate import init_empty_weights
    from diffusers import AutoencoderKLQwenImage
    from diffusers.loaders.single_file_utils import convert_wan_vae_to_diffusers

    if _WAN_VAE_MIDDLE in weights:
        weights = convert_wan_vae_to_diffusers(weights)
    settings = AutoencoderKLQwenImage.load_config(config / component, local_files_only=True)
    with init_empty_weights():
        model = AutoencoderKLQwenImage.from_config(settings)
    model.load_state_dict({k: v.to(dtype) for k, v in weights.items()}, strict=True, assign=True)
    return model.eval()


def folder_components(config: Path, folders: dict[str, Path]) -> dict[str, Any]:
    """The tokenizer of the folder found for the file; an Edit model's processor too."""
    import json

    import transformers

    index = json.loads((config / "model_index.json").read_text(encoding="utf-8"))
    tokenizer_class = getattr(transformers, index[TOKENIZER][1])
    tokenizer = tokenizer_class.from_pretrained(folders[TOKENIZER], local_files_only=True)
    components: dict[str, Any] = {TOKENIZER: tokenizer}
    if PROCESSOR in index:
        components[PROCESSOR] = _processor(config / PROCESSOR, tokenizer)
    return components


def _processor(settings: Path, tokenizer: Any) -> Any:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from app.engine.generation.families.qwen.processor import ImageOnlyQwen2VLProcessor

    image_processor = Qwen2VLImageProcessorPil.from_pretrained(settings, local_files_only=True)
    return ImageOnlyQwen2VLProcessor(image_processor=image_processor, tokenizer=tokenizer)
