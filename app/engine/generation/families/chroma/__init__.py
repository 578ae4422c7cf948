"""Chroma: Flux.1-schnell's shape (a transformer on packed latents) with T5 alone, its
padding masked, and true CFG with a negative prompt; `model.py` drives it as
`ChromaPipeline` (and its img2img and inpaint pipelines) do. Folders only."""

from __future__ import annotations

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.files.registry import Architecture, FamilySpec, Folder

CHROMA_ID = Architecture.declare("chroma", released="2025-08")

CHROMA = FamilySpec(
    architecture=CHROMA_ID,
    label="Chroma",
    transformer=True,
    native_size=1024,
    folder=Folder(
        pipelines=("ChromaPipeline",),
        parts=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    ),
    pipeline="ChromaPipeline",
    driven_pipelines=("ChromaPipeline", "ChromaImg2ImgPipeline", "ChromaInpaintPipeline"),
    driver="app.engine.generation.families.chroma.model:ChromaFamily",
    checkpoint_family="chroma",
    checkpoint_label="Chroma",
    # The IP-Adapter parts the stock pipeline can hold; the released folders have none.
    optional_parts=("image_encoder", "feature_extractor"),
    requests=FLOW_REQUESTS,  # true CFG: the negative prompt is read
    float16_overflowing_encoders=("text_encoder",),  # T5 v1.1 XXL
)

FAMILIES = (CHROMA,)
