"""SDXL: a UNet with two CLIP text encoders (ViT-L and OpenCLIP ViT-bigG); `model.py` drives
it as `StableDiffusionXLPipeline` does."""

from __future__ import annotations

from app.engine.generation.files.registry import (
    Architecture,
    CheckpointFile,
    FamilySpec,
    Folder,
)

# The ids it stores and is asked by (`Architecture.SDXL`).
SDXL_ID = Architecture.declare("sdxl", released="2023-07")

UNET = "model.diffusion_model."
VAE = "first_stage_model."
CLIP = "conditioner.embedders.0.transformer."  # CLIP ViT-L, as SD 1.x's
OPEN_CLIP = "conditioner.embedders.1.model."  # OpenCLIP ViT-bigG

SDXL = FamilySpec(
    architecture=SDXL_ID,
    label="SDXL",
    transformer=False,
    native_size=1024,
    folder=Folder(
        pipelines=("StableDiffusionXLPipeline", "StableDiffusionXLInpaintPipeline"),
        parts=("unet", "vae", "scheduler", "text_encoder"),
    ),
    pipeline="StableDiffusionXLPipeline",
    driven_pipelines=("StableDiffusionXLPipeline", "StableDiffusionXLImg2ImgPipeline"),
    driver="app.engine.generation.families.sdxl.model:StableDiffusionXLFamily",
    checkpoint_family="sdxl",
    checkpoint_label="SDXL",
    checkpoint_file=CheckpointFile(
        markers=(OPEN_CLIP, CLIP),
        parts=(
            ("UNet", UNET),
            ("VAE", VAE),
            ("first text encoder (CLIP ViT-L)", CLIP),
            ("second text encoder (OpenCLIP ViT-bigG)", OPEN_CLIP),
        ),
        config_folder="sdxl",
    ),
    # An invisible watermark alters pixels; not Easel's to add.
    load_options=(("add_watermarker", False),),
)

FAMILIES = (SDXL,)
