"""Flux.1 Fill: Flux.1 dev's transformer that reads, beside its noisy latents, the picture
with the masked area blanked (its latents) and the mask itself, and paints the masked area
anew: inpaint and outpaint only. `model.py` drives it as `FluxFillPipeline` does. Folders
only (a Fill transformer file is refused by Flux.1's header read, in one sentence).

A folder is Fill's when its model index says `FluxFillPipeline`, or says `FluxPipeline`
over a transformer whose `in_channels` is Fill's (`flux.claims_fill`): what a converted
copy of black-forest-labs/FLUX.1-Fill-dev may say. Torch-free: what submit checks is here."""

from __future__ import annotations

from dataclasses import replace

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.families.flux import claims_fill
from app.engine.generation.files.registry import Architecture, FamilySpec, Folder

FLUX1_FILL_ID = Architecture.declare("flux1-fill", released="2024-11")

NEEDS_MASK = (
    "Flux.1 Fill only inpaints and outpaints: it needs a picture and a mask (the mask editor, "
    "python -m app inpaint N --mask M.png --model M, or outpaint N --model M), not a prompt "
    "alone or an init image without a mask"
)

FLUX1_FILL = FamilySpec(
    architecture=FLUX1_FILL_ID,
    label="Flux.1 Fill",
    transformer=True,
    native_size=1024,
    folder=Folder(
        pipelines=("FluxFillPipeline", "FluxPipeline"),
        parts=("transformer", "vae", "scheduler", "text_encoder", "text_encoder_2"),
        claims=claims_fill,
    ),
    pipeline="FluxFillPipeline",
    driven_pipelines=("FluxFillPipeline",),
    driver="app.engine.generation.families.flux_fill.model:FluxFillFamily",
    checkpoint_family="flux1-fill",
    checkpoint_label="Flux.1 Fill",
    # Guidance-distilled as Flux.1 dev (`cfg` its guidance input, stock default 30); no
    # negative prompt; a mask always (inpaint, outpaint), never text to image or img2img.
    requests=replace(
        FLOW_REQUESTS, negative_prompt=False, distilled_guidance=True, needs_mask=NEEDS_MASK
    ),
    float16_overflowing_encoders=("text_encoder_2",),  # T5 v1.1 XXL
)

FAMILIES = (FLUX1_FILL,)
