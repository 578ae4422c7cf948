"""A Flux.1 Kontext folder as submit sees it, without weights: its model index and empty
part files. Enough for the checks at submit (files only, no torch) in tests that queue an
edit and never run it; writing the tiny random Kontext (`app.testing.tiny.kontext`) takes
seconds of torch that such a test does not need."""

from __future__ import annotations

import json
from pathlib import Path

PARTS = {
    "scheduler": ("diffusers", "FlowMatchEulerDiscreteScheduler"),
    "text_encoder": ("transformers", "CLIPTextModel"),
    "text_encoder_2": ("transformers", "T5EncoderModel"),
    "tokenizer": ("transformers", "CLIPTokenizer"),
    "tokenizer_2": ("transformers", "T5Tokenizer"),
    "transformer": ("diffusers", "FluxTransformer2DModel"),
    "vae": ("diffusers", "AutoencoderKL"),
}
WEIGHTS = {
    "transformer": "diffusion_pytorch_model.safetensors",
    "vae": "diffusion_pytorch_model.safetensors",
    "text_encoder": "model.safetensors",
    "text_encoder_2": "model.safetensors",
}


def write_kontext_index(folder: Path, pipeline: str = "FluxKontextPipeline") -> Path:
    """`folder` made a Kontext model as the model scan reads it (no weights); or another
    Flux.1 pipeline's (`FluxFillPipeline`: a Flux.1 Fill model)."""
    folder.mkdir(parents=True, exist_ok=True)
    index = {"_class_name": pipeline, **{k: list(v) for k, v in PARTS.items()}}
    (folder / "model_index.json").write_text(json.dumps(index))
    for part in PARTS:
        (folder / part).mkdir(exist_ok=True)
    for part, name in WEIGHTS.items():
        (folder / part / name).touch()
    return folder


QWEN_EDIT_PARTS = {
    "scheduler": ("diffusers", "FlowMatchEulerDiscreteScheduler"),
    "text_encoder": ("transformers", "Qwen2_5_VLForConditionalGeneration"),
    "tokenizer": ("transformers", "Qwen2Tokenizer"),
    "processor": ("transformers", "Qwen2VLProcessor"),
    "transformer": ("diffusers", "QwenImageTransformer2DModel"),
    "vae": ("diffusers", "AutoencoderKLQwenImage"),
}


def write_qwen_edit_index(folder: Path, *, plus: bool = False) -> Path:
    """`folder` made a Qwen-Image-Edit model (`plus`: Edit Plus, 2509) as the model scan
    reads it (no weights)."""
    pipeline = "QwenImageEditPlusPipeline" if plus else "QwenImageEditPipeline"
    folder.mkdir(parents=True, exist_ok=True)
    index = {"_class_name": pipeline, **{k: list(v) for k, v in QWEN_EDIT_PARTS.items()}}
    (folder / "model_index.json").write_text(json.dumps(index))
    for part in QWEN_EDIT_PARTS:
        (folder / part).mkdir(exist_ok=True)
    for part in ("transformer", "vae"):
        (folder / part / "diffusion_pytorch_model.safetensors").touch()
    (folder / "text_encoder" / "model.safetensors").touch()
    return folder
