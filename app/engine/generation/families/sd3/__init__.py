"""SD 3.5 (medium, large, large turbo): MMDiT, CLIP-L + CLIP-G + T5-XXL; `model.py` drives
it as `StableDiffusion3Pipeline` (and its img2img and inpaint pipelines) do."""

from __future__ import annotations

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.files.registry import (
    Architecture,
    FamilySpec,
    Folder,
    Shapes,
    TransformerFile,
)
from app.engine.generation.files.transformer_files import (
    CLIP_G,
    CLIP_L,
    CLIP_PAIR,
    T5,
    VAE,
    FileNeeds,
)

# The ids it stores and is asked by (`Architecture.SD3`).
SD3_ID = Architecture.declare("sd3", released="2024-10")

_LARGE_LAYERS = 38


def read_header(bare: Shapes, name: str) -> FileNeeds | str:
    """What an SD 3.5 transformer (Stability's keys) needs, and which of the three it is:
    medium has dual attention (MMDiT-X), large 38 blocks (turbo: by its name)."""
    try:
        pooled = bare["y_embedder.mlp.0.weight"][1]
        widths = {T5: bare["context_embedder.weight"][1], VAE: bare["x_embedder.proj.weight"][1]}
    except (KeyError, IndexError):
        return "an incomplete SD 3 transformer (no x_embedder, context_embedder or y_embedder)"
    layers = {k.split(".")[1] for k in bare if k.startswith("joint_blocks.")}
    if any(".attn2." in k for k in bare):
        config = "sd3.5-medium"  # MMDiT-X: dual attention in the first blocks
    elif len(layers) == _LARGE_LAYERS:
        config = "sd3.5-large-turbo" if "turbo" in name.lower() else "sd3.5-large"
    else:
        return (
            f"an SD 3 model with {len(layers)} blocks and no dual attention (SD 3.0 medium?); "
            "Easel runs SD 3.5 medium, large and large turbo"
        )
    # The pooled text vector is CLIP-L's and CLIP-G's side by side: G is the wider one.
    widths[CLIP_PAIR] = pooled
    return FileNeeds(SD3_ID, config, widths)


SD3 = FamilySpec(
    architecture=SD3_ID,
    label="SD 3.5",
    transformer=True,
    native_size=1024,  # a folder's transformer states its own (sample_size)
    # T5 may be absent: the stock pipeline encodes its part of the prompt as zeros.
    folder=Folder(
        pipelines=("StableDiffusion3Pipeline",),
        parts=("transformer", "vae", "scheduler", "text_encoder", "text_encoder_2"),
    ),
    pipeline="StableDiffusion3Pipeline",
    driven_pipelines=("StableDiffusion3Pipeline", "StableDiffusion3Img2ImgPipeline"),
    driver="app.engine.generation.families.sd3.model:StableDiffusion3Family",
    checkpoint_family="sd3",
    checkpoint_label="SD 3.5",
    requests=FLOW_REQUESTS,
    transformer_file=TransformerFile(
        markers=("joint_blocks.",),
        split_parts=(CLIP_L, CLIP_G, T5, VAE),
        read_header=read_header,
        transformer_class="SD3Transformer2DModel",
        components=((CLIP_L, "text_encoder"), (CLIP_G, "text_encoder_2"), (T5, "text_encoder_3")),
    ),
    optional_parts=("text_encoder_3", "tokenizer_3"),
    float16_overflowing_encoders=("text_encoder_3",),  # T5 v1.1 XXL
)

FAMILIES = (SD3,)
