"""Wan 2.1 text to video (1.3B and 14B): a 3D DiT on (1, 2, 2) patches, the UMT5 text
encoder, the Wan VAE (4x in time, 8x in space); `model.py` drives it as `WanPipeline`
does. Diffusers folders only, for now."""

from __future__ import annotations

from app.engine.generation.files.registry import (
    Architecture,
    FamilySpec,
    Folder,
    Requests,
    VideoRequests,
)

WAN21_ID = Architecture.declare("wan2.1", released="2025-02")

WAN_SIZE_MULTIPLE = 16  # the VAE's 8 times the transformer's 2x2 spatial patches
# UniPC first: the released folders' own scheduler (the stock pipeline's default there);
# Euler: the flow-matching Euler of the other flow families, with the folder's shift.
WAN_SAMPLERS = ("UniPC", "Euler")

WAN21 = FamilySpec(
    architecture=WAN21_ID,
    label="Wan 2.1",
    transformer=True,
    native_size=832,  # its 480p clips are 832x480
    folder=Folder(
        pipelines=("WanPipeline",),
        parts=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    ),
    pipeline="WanPipeline",
    driven_pipelines=("WanPipeline",),
    driver="app.engine.generation.families.wan.model:WanFamily",
    checkpoint_family="wan2.1",
    checkpoint_label="Wan 2.1",
    # `WanPipeline` runs First Block Cache with "cond"/"uncond" contexts, as `model.py` does
    # (on `transformer` only: a Wan 2.2 folder's low-noise expert runs uncached, as stock).
    step_cache=True,
    requests=Requests(
        samplers=WAN_SAMPLERS,
        size_multiple=WAN_SIZE_MULTIPLE,
        img2img=False,
        img2img_refusal="Wan 2.1 text to video takes no init image",
        reference_images=False,
    ),
    float16_overflowing_encoders=("text_encoder",),  # UMT5, as T5 v1.1
    preview="app.engine.generation.families.wan.model:WanPreviewer",
    # Its VAE packs 4 frames into each latent frame after the first: 4k+1 frames.
    video=VideoRequests(frame_step=4, default_frames=81, default_fps=16),
)

FAMILIES = (WAN21,)
