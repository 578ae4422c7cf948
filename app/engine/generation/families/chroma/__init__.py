"""Chroma: Flux.1-schnell's shape (a transformer on packed latents) with T5 alone, its
padding masked, and true CFG with a negative prompt; `model.py` drives it as
`ChromaPipeline` (and its img2img and inpaint pipelines) do. Its diffusers folders, and the
files in lodestones' layout (`chroma-unlocked-v*.safetensors`, Chroma1-HD; all-in-one,
ComfyUI's split layout beside a T5 and Flux's ae.safetensors, GGUF, fp8), recognised by
their `distilled_guidance_layer` (files/transformer_files.py)."""

from __future__ import annotations

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.files.registry import (
    Architecture,
    FamilySpec,
    Folder,
    Shapes,
    TransformerFile,
)
from app.engine.generation.files.transformer_files import T5, VAE, FileNeeds

CHROMA_ID = Architecture.declare("chroma", released="2025-08")

GUIDANCE_LAYER = "distilled_guidance_layer."  # what Flux.1's files lack: Chroma's by content


def claims_file(bare: list[str], name: str) -> bool:
    return any(key.startswith(GUIDANCE_LAYER) for key in bare)


def read_header(bare: Shapes, name: str) -> FileNeeds | str:
    """What a Chroma transformer needs: its T5's width (`txt_in`), its VAE's latent
    channels (`img_in`: 2 x 2 patches, packed); no CLIP."""
    try:
        widths = {T5: bare["txt_in.weight"][1], VAE: bare["img_in.weight"][1] // 4}
    except (KeyError, IndexError):
        return "an incomplete Chroma transformer (no img_in or txt_in weights)"
    return FileNeeds(CHROMA_ID, "chroma", widths)


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
    transformer_file=TransformerFile(
        markers=(GUIDANCE_LAYER, "double_blocks.", "single_blocks."),
        split_parts=(T5, VAE),
        read_header=read_header,
        transformer_class="ChromaTransformer2DModel",
        components=((T5, "text_encoder"),),
        to_diffusers_keys="app.engine.generation.families.chroma.keys:chroma_to_diffusers",
        claims=claims_file,
    ),
)

FAMILIES = (CHROMA,)
