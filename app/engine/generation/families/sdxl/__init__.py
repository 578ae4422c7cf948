"""SDXL: a UNet with two CLIP text encoders (ViT-L and OpenCLIP ViT-bigG); `model.py` drives
it as `StableDiffusionXLPipeline` does."""

from __future__ import annotations

from app.engine.generation.files.registry import (
    Architecture,
    CheckpointFile,
    FamilySpec,
    Folder,
    Guidance,
)
from app.engine.jobs.params import SDXL_UNION_TYPES

# The ids it stores and is asked by (`Architecture.SDXL`).
SDXL_ID = Architecture.declare("sdxl", released="2023-07")

UNET = "model.diffusion_model."
VAE = "first_stage_model."
CLIP = "conditioner.embedders.0.transformer."  # CLIP ViT-L, as SD 1.x's
OPEN_CLIP = "conditioner.embedders.1.model."  # OpenCLIP ViT-bigG
REFINER_OPEN_CLIP = "conditioner.embedders.0.model."  # the refiner's: OpenCLIP ViT-bigG alone
REFINER = (
    "an SDXL refiner (it has only the OpenCLIP text encoder); "
    "refiner-only models cannot make an image from a prompt alone"
)
# AUTOMATIC1111's "cheap approximation" of SDXL's VAE: each scaled latent channel's RGB.
PREVIEW_FACTORS = (
    (0.3448, 0.4168, 0.4395),
    (-0.1953, -0.0290, 0.0250),
    (0.1074, 0.0886, -0.0163),
    (-0.3730, -0.2499, -0.2088),
)

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
        refused=((REFINER_OPEN_CLIP, REFINER),),
    ),
    # An invisible watermark alters pixels; not Easel's to add.
    load_options=(("add_watermarker", False),),
    # Its UNet's text is both CLIPs side by side (768 + 1280); its ControlNets carry the
    # size and crop conditioning, and diffusers' ControlNet Union is made for it.
    guidance=Guidance(
        cross_attention_width=2048,
        added_embedding="text_time",
        controlnet_union=True,
        union_types=SDXL_UNION_TYPES,
    ),
    preview_factors=PREVIEW_FACTORS,
)

FAMILIES = (SDXL,)
