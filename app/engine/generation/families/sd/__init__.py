"""SD 1.x and SD 2.x: one UNet pipeline class, one runtime class (`model.py`), two families
told apart by their text encoder (SD 1.x: OpenAI CLIP ViT-L, 768 wide, quick GELU; SD 2.x:
OpenCLIP ViT-H, 1024 wide, plain GELU)."""

from __future__ import annotations

from dataclasses import replace

from app.engine.generation.files.registry import (
    Architecture,
    CheckpointFile,
    FamilySpec,
    Folder,
    FolderConfigs,
    Guidance,
)

# The ids it stores and is asked by (`Architecture.SD1`).
SD1_ID = Architecture.declare("sd1", released="2022-08")
SD2_ID = Architecture.declare("sd2", released="2022-11")

UNET = "model.diffusion_model."
VAE = "first_stage_model."
SD1_CLIP = "cond_stage_model.transformer."
SD2_OPEN_CLIP = "cond_stage_model.model."

_PIPELINES = ("StableDiffusionPipeline", "StableDiffusionInpaintPipeline")
_DRIVEN = ("StableDiffusionPipeline", "StableDiffusionImg2ImgPipeline")
_FOLDER_PARTS = ("unet", "vae", "scheduler", "text_encoder")
# No safety checker: Easel's user decides what to keep; diffusers asks to be told so.
_LOAD_OPTIONS = (
    ("safety_checker", None),
    ("feature_extractor", None),
    ("requires_safety_checker", False),
)


# AUTOMATIC1111's "cheap approximation" of SD's VAE: each scaled latent channel's RGB.
PREVIEW_FACTORS = (
    (0.298, 0.207, 0.208),
    (0.187, 0.286, 0.173),
    (-0.158, 0.189, 0.264),
    (-0.184, -0.271, -0.473),
)


def is_sd2_folder(configs: FolderConfigs) -> bool:
    unet, text_encoder = configs.get("unet", {}), configs.get("text_encoder", {})
    return unet.get("cross_attention_dim") == 1024 or text_encoder.get("hidden_act") == "gelu"


SD1 = FamilySpec(
    architecture=SD1_ID,
    label="SD 1.x",
    transformer=False,
    native_size=512,
    folder=Folder(_PIPELINES, _FOLDER_PARTS, claims=lambda configs: not is_sd2_folder(configs)),
    pipeline="StableDiffusionPipeline",
    driven_pipelines=_DRIVEN,
    driver="app.engine.generation.families.sd.model:StableDiffusionFamily",
    checkpoint_family="sd",
    checkpoint_label="SD 1.x/2.x",
    checkpoint_file=CheckpointFile(
        markers=(SD1_CLIP,),
        parts=(("UNet", UNET), ("VAE", VAE), ("text encoder", SD1_CLIP)),
        config_folder="sd1",
    ),
    load_options=_LOAD_OPTIONS,
    guidance=Guidance(cross_attention_width=768),  # OpenAI CLIP ViT-L's
    preview_factors=PREVIEW_FACTORS,
)

# SD 1.x's runtime, pipelines and options; its own text encoder, config folders and sizes.
SD2 = replace(
    SD1,
    architecture=SD2_ID,
    label="SD 2.x",
    native_size=512,  # the base model; the common 768 one is v-prediction
    folder=replace(SD1.folder, claims=is_sd2_folder),
    checkpoint_file=CheckpointFile(
        markers=(SD2_OPEN_CLIP,),
        parts=(("UNet", UNET), ("VAE", VAE), ("text encoder", SD2_OPEN_CLIP)),
        config_folder="sd2-base",
        config_folder_v="sd2-v",
        v_prediction=True,  # SD 2.x ships two kinds: 512 epsilon (base) and 768 v (common)
        native_size_v=768,
    ),
    guidance=Guidance(cross_attention_width=1024),  # OpenCLIP ViT-H's
)

FAMILIES = (SD1, SD2)
