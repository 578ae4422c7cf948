"""Qwen-Image: an MMDiT on 2x2 patches of 16-channel latents, a Qwen2.5-VL text encoder and
a causal 3D VAE (Wan 2.1's kind); `model.py` drives it as `QwenImagePipeline` (and its
img2img and inpaint pipelines) do, true CFG with the negative prompt included. Folders."""

from __future__ import annotations

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.files.registry import Architecture, FamilySpec, Folder

QWEN_IMAGE = FamilySpec(
    architecture=Architecture.QWEN_IMAGE,
    label="Qwen-Image",
    transformer=True,
    native_size=1024,  # the pipeline's default_sample_size (128) times its VAE's 8
    folder=Folder(
        pipelines=("QwenImagePipeline",),
        parts=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    ),
    pipeline="QwenImagePipeline",
    driven_pipelines=(
        "QwenImagePipeline",
        "QwenImageImg2ImgPipeline",
        "QwenImageInpaintPipeline",
    ),
    driver="app.engine.generation.families.qwen.model:QwenImageFamily",
    checkpoint_family="qwen-image",
    checkpoint_label="Qwen-Image",
    requests=FLOW_REQUESTS,  # Euler, sides in multiples of 16, true CFG (a negative prompt)
    float16_overflowing_encoders=("text_encoder",),  # Qwen2.5-VL, trained in bfloat16
    # Its VAE's latents are 5D (a time axis) and normalised per channel: its own previewer.
    preview="app.engine.generation.families.qwen.model:QwenImagePreviewer",
)

FAMILIES = (QWEN_IMAGE,)
