"""Z-Image (Turbo): a single-stream DiT with a Qwen3 text encoder; `model.py` drives it as
`ZImagePipeline` (and its img2img and inpaint pipelines) do. Folders only."""

from __future__ import annotations

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.files.registry import Architecture, FamilySpec, Folder

# The ids it stores and is asked by (`Architecture.ZIMAGE`).
ZIMAGE_ID = Architecture.declare("zimage", released="2025-11")

ZIMAGE = FamilySpec(
    architecture=ZIMAGE_ID,
    label="Z-Image",
    transformer=True,
    native_size=1024,
    folder=Folder(
        pipelines=("ZImagePipeline",),
        parts=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    ),
    pipeline="ZImagePipeline",
    driven_pipelines=("ZImagePipeline", "ZImageImg2ImgPipeline"),
    driver="app.engine.generation.families.zimage.model:ZImageFamily",
    checkpoint_family="zimage",
    checkpoint_label="Z-Image",
    requests=FLOW_REQUESTS,
    float16_overflowing_encoders=("text_encoder",),  # Qwen3
)

FAMILIES = (ZIMAGE,)
