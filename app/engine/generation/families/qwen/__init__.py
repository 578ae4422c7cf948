"""Qwen-Image: an MMDiT on 2x2 patches of 16-channel latents, a Qwen2.5-VL text encoder and
a causal 3D VAE (Wan 2.1's kind); `model.py` drives it as `QwenImagePipeline` (and its
img2img and inpaint pipelines) do, true CFG with the negative prompt included.

Folders run. The diffusion model files of ComfyUI's split layout (`qwen_image_*.safetensors`
in diffusion_models/, bf16 or fp8, and their GGUF conversions) are recognised by their keys
(diffusers' own names, `txt_norm.` being Qwen-Image's alone) and refused in one sentence:
the text encoder beside them (`qwen_2.5_vl_7b*.safetensors`) comes without its tokenizer,
which Easel does not ship yet, so no pipeline can be assembled from them."""

from __future__ import annotations

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.files.registry import (
    Architecture,
    FamilySpec,
    Folder,
    Shapes,
    TransformerFile,
)
from app.engine.generation.files.transformer_files import VAE

QWEN_IMAGE_ID = Architecture.declare("qwen-image", released="2025-08")

QWEN_VL = "qwen2.5-vl"  # the text encoder part of the split layout
SPLIT_REFUSAL = (
    "a Qwen-Image diffusion model in ComfyUI's split layout, which Easel cannot load yet (its "
    "Qwen2.5-VL text encoder file comes without the tokenizer Easel would need); use a "
    "diffusers folder of Qwen-Image (with model_index.json, e.g. a copy of Qwen/Qwen-Image)"
)


def read_header(bare: Shapes, name: str) -> str:
    """Why a Qwen-Image diffusion model file cannot be used (for now, always: see above)."""
    if "img_in.weight" not in bare or "txt_in.weight" not in bare:
        return "an incomplete Qwen-Image transformer (no img_in or txt_in weights)"
    return SPLIT_REFUSAL


QWEN_IMAGE = FamilySpec(
    architecture=QWEN_IMAGE_ID,
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
    # First Block Cache runs on the stock pipelines, which name the prompt's transformer
    # call "cond" and the negative prompt's "uncond", as `model.py` does.
    step_cache=True,
    float16_overflowing_encoders=("text_encoder",),  # Qwen2.5-VL, trained in bfloat16
    # Its VAE's latents are 5D (a time axis) and normalised per channel: its own previewer.
    preview="app.engine.generation.families.qwen.model:QwenImagePreviewer",
    # Recognised, and refused by its header read; what assembling it will take, declared.
    transformer_file=TransformerFile(
        markers=("txt_norm.",),
        split_parts=(QWEN_VL, VAE),
        read_header=read_header,
        transformer_class="QwenImageTransformer2DModel",
        components=((QWEN_VL, "text_encoder"),),
    ),
)

FAMILIES = (QWEN_IMAGE,)
