"""Qwen-Image: an MMDiT on 2x2 patches of 16-channel latents, a Qwen2.5-VL text encoder and
a causal 3D VAE (Wan 2.1's kind); `model.py` drives it as `QwenImagePipeline` (and its
img2img and inpaint pipelines) do, true CFG with the negative prompt included.

Folders run, and the files artists have (`files.py`): ComfyUI's split layout
(`qwen_image_*.safetensors` in diffusion_models/, bf16 or fp8, and their GGUF conversions)
beside `text_encoders/qwen_2.5_vl_7b*.safetensors` (bf16, or ComfyUI's fp8_scaled,
dequantised as it loads) and `vae/qwen_image_vae.safetensors`, with Qwen2.5's tokenizer
from a `tokenizer/` folder beside them or the Hugging Face cache."""

from __future__ import annotations

from dataclasses import replace

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.families.qwen import files
from app.engine.generation.files.registry import (
    Architecture,
    FamilySpec,
    Folder,
    TransformerFile,
)
from app.engine.generation.files.transformer_files import QWEN_VL, WAN_VAE
from app.engine.jobs.params import MAX_EDIT_IMAGES

QWEN_IMAGE_ID = Architecture.declare("qwen-image", released="2025-08")

_LOADING = "app.engine.generation.families.qwen.loading:"
# Qwen-Image's file (diffusers' own keys: no converter); Edit's and Edit Plus's are its
# tensors under another name (files.py), each claiming the names that are its own.
TRANSFORMER_FILE = TransformerFile(
    markers=("txt_norm.",),
    split_parts=(QWEN_VL, WAN_VAE),
    read_header=files.read_header,
    transformer_class="QwenImageTransformer2DModel",
    components=((QWEN_VL, "text_encoder"),),
    find_folders=files.find_tokenizer,
    part_loaders=((QWEN_VL, _LOADING + "text_encoder"), (WAN_VAE, _LOADING + "vae")),
    folder_components=_LOADING + "folder_components",
    part_names=(
        (QWEN_VL, "a Qwen2.5-VL text encoder (qwen_2.5_vl_7b.safetensors)"),
        (WAN_VAE, "Qwen-Image's VAE (qwen_image_vae.safetensors)"),
    ),
)


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
    transformer_file=TRANSFORMER_FILE,
)

QWEN_IMAGE_EDIT_ID = Architecture.declare("qwen-image-edit", released="2025-08")

QWEN_EDIT_ONLY = (
    "Qwen-Image-Edit edits a picture from an instruction and draws nothing without one; "
    'submit an edit (python -m app edit N "instruction") or pick a text-to-image model'
)

# Qwen-Image-Edit (Qwen/Qwen-Image-Edit): Qwen-Image's transformer reading the input image's
# latents beside its own, and the instruction encoded by Qwen2.5-VL together with the image.
# An edit job only (the stock pipeline needs an image); true CFG with the negative prompt as
# Qwen-Image; the output at the job's size, the input read at about 1 megapixel.
QWEN_IMAGE_EDIT = FamilySpec(
    architecture=QWEN_IMAGE_EDIT_ID,
    label="Qwen-Image-Edit",
    transformer=True,
    native_size=1024,
    folder=Folder(
        pipelines=("QwenImageEditPipeline",),
        parts=("transformer", "vae", "scheduler", "text_encoder", "tokenizer", "processor"),
    ),
    pipeline="QwenImageEditPipeline",
    driven_pipelines=("QwenImageEditPipeline",),
    driver="app.engine.generation.families.qwen.edit:QwenImageEditFamily",
    checkpoint_family="qwen-image-edit",
    checkpoint_label="Qwen-Image-Edit",
    requests=replace(
        FLOW_REQUESTS,
        img2img=False,
        img2img_refusal=QWEN_EDIT_ONLY,
        edit=True,
        needs_edit=QWEN_EDIT_ONLY,
        # QwenImageEditPipeline's (and Plus's) defaults: num_inference_steps=50,
        # true_cfg_scale=4.0, what an edit on it runs with unless told.
        edit_steps=50,
        edit_cfg=4.0,
    ),
    folder_components="app.engine.generation.families.qwen.processor:edit_components",
    float16_overflowing_encoders=("text_encoder",),
    # First Block Cache runs on the stock pipelines (Plus's too), which name their calls
    # "cond" and "uncond" as Qwen-Image's (tests/engine/generation/test_step_cache_qwen_edit.py).
    step_cache=True,
    preview="app.engine.generation.families.qwen.model:QwenImagePreviewer",
    transformer_file=replace(TRANSFORMER_FILE, claims=files.claims("qwen-image-edit")),
)

QWEN_IMAGE_EDIT_PLUS_ID = Architecture.declare("qwen-image-edit-plus", released="2025-09")

# Qwen-Image-Edit Plus (Qwen/Qwen-Image-Edit-2509, -2511): as Qwen-Image-Edit, each input
# read at two sizes (about 384x384 for Qwen2.5-VL, 1 megapixel for the VAE). Up to
# `MAX_EDIT_IMAGES` input images ("Picture 1", "Picture 2", ... in the template): the one an
# edit job edits first, then its further ones.
QWEN_IMAGE_EDIT_PLUS = replace(
    QWEN_IMAGE_EDIT,
    architecture=QWEN_IMAGE_EDIT_PLUS_ID,
    label="Qwen-Image-Edit Plus",
    folder=replace(QWEN_IMAGE_EDIT.folder, pipelines=("QwenImageEditPlusPipeline",)),
    pipeline="QwenImageEditPlusPipeline",
    driven_pipelines=("QwenImageEditPlusPipeline",),
    driver="app.engine.generation.families.qwen.edit:QwenImageEditPlusFamily",
    checkpoint_family="qwen-image-edit-plus",
    checkpoint_label="Qwen-Image-Edit Plus",
    requests=replace(QWEN_IMAGE_EDIT.requests, edit_images=MAX_EDIT_IMAGES),
    transformer_file=replace(TRANSFORMER_FILE, claims=files.claims("qwen-image-edit-plus")),
)

FAMILIES = (QWEN_IMAGE, QWEN_IMAGE_EDIT, QWEN_IMAGE_EDIT_PLUS)
