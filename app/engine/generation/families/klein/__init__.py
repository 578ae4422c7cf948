"""Flux.2 Klein (4B, 9B; base and step-distilled): Qwen3, latents in normalised 2x2 patches;
`model.py` drives it as `Flux2KleinPipeline` (and its inpaint pipeline) do. Folders only."""

from __future__ import annotations

from dataclasses import replace

from app.engine.generation.families.flow_params import FLOW_REQUESTS, KLEIN_IMG2IMG_REFUSAL
from app.engine.generation.files.registry import Architecture, FamilySpec, Folder

# The ids it stores and is asked by (`Architecture.FLUX2_KLEIN`).
FLUX2_KLEIN_ID = Architecture.declare("flux2-klein", released="2026-01")

FLUX2_KLEIN = FamilySpec(
    architecture=FLUX2_KLEIN_ID,
    label="Flux.2 Klein",
    transformer=True,
    native_size=1024,
    folder=Folder(
        pipelines=("Flux2KleinPipeline",),
        parts=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    ),
    pipeline="Flux2KleinPipeline",
    driven_pipelines=("Flux2KleinPipeline",),
    driver="app.engine.generation.families.klein.model:Flux2KleinFamily",
    checkpoint_family="flux2-klein",
    checkpoint_label="Flux.2 Klein",
    # Text to image and inpaint: diffusers has no Klein img2img pipeline to mirror.
    requests=replace(
        FLOW_REQUESTS,
        img2img=False,
        img2img_refusal=KLEIN_IMG2IMG_REFUSAL,
        step_distilled_folders=True,
    ),
    float16_overflowing_encoders=("text_encoder",),  # Qwen3
    preview="app.engine.generation.families.klein.model:Flux2Previewer",
)

FAMILIES = (FLUX2_KLEIN,)
