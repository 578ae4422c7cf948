"""Flux.1 Kontext: Flux.1 dev's transformer that reads an input image's latents beside its
own and edits the image as an instruction says; `model.py` drives it as
`FluxKontextPipeline` does, and an inpaint (the edit limited to a mask) as
`FluxKontextInpaintPipeline`. Its diffusers folders, and `flux1-kontext-dev.safetensors` in
Black Forest Labs' layout (all-in-one, ComfyUI's split layout, GGUF, fp8) as Flux.1's files
are read (files/transformer_files.py). An edit is a job of kind "edit" (jobs.params):
the instruction is its prompt, the image it edits its init image (`job:<id>`: a child of
that job). Torch-free: what submit checks is here too."""

from __future__ import annotations

from dataclasses import replace

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.families.flux import flux_widths
from app.engine.generation.files.registry import (
    Architecture,
    FamilySpec,
    Folder,
    Shapes,
    TransformerFile,
)
from app.engine.generation.files.transformer_files import CLIP_L, T5, VAE, FileNeeds

FLUX1_KONTEXT_ID = Architecture.declare("flux1-kontext", released="2025-06")

# Kontext dev's transformer file has Flux.1 dev's keys and shapes, and its releases no
# metadata that says Kontext: a Flux-layout file is Kontext's when its name says so.
NAME_MARK = "kontext"


def claims_file(bare: list[str], name: str) -> bool:
    """A Flux-layout file named as Kontext (`flux1-kontext-dev.safetensors`, city96's and
    QuantStack's `flux1-kontext-dev-Q8_0.gguf`), not Chroma's (its own guidance layer)."""
    chroma = any(key.startswith("distilled_guidance_layer.") for key in bare)
    return NAME_MARK in name.lower() and not chroma


def read_header(bare: Shapes, name: str) -> FileNeeds | str:
    """Flux.1 dev's needs (`flux_widths`), assembled with Kontext's shipped configs."""
    widths = flux_widths(bare)
    if isinstance(widths, str):
        return widths
    if "guidance_in.in_layer.weight" not in bare:
        return "a Flux.1 Kontext file without the guidance input Kontext dev has"
    return FileNeeds(FLUX1_KONTEXT_ID, "flux1-kontext-dev", widths)


# The stock pipeline's `max_area` default: it draws about this many pixels at the asked
# aspect ratio. Easel draws the job's own size, at most this (a larger one the stock
# pipeline would shrink, so it is refused rather than drawn otherwise than asked).
MAX_AREA = 1024 * 1024
# `PREFERRED_KONTEXT_RESOLUTIONS` of diffusers' Kontext pipelines (width, height), torch-free
# for submit (a test keeps it equal): the inpaint pipeline draws at the one nearest the
# picture's shape, so an inpaint job is drawn at one of these.
PREFERRED_RESOLUTIONS = (
    (672, 1568), (688, 1504), (720, 1456), (752, 1392), (800, 1328), (832, 1248), (880, 1184),
    (944, 1104), (1024, 1024), (1104, 944), (1184, 880), (1248, 832), (1328, 800), (1392, 752),
    (1456, 720), (1504, 688), (1568, 672),
)  # fmt: skip
KONTEXT_IMG2IMG_REFUSAL = (
    "Flux.1 Kontext edits an image from an instruction rather than running img2img; submit "
    'an edit (python -m app edit N "instruction") or clear the init image'
)

FLUX1_KONTEXT = FamilySpec(
    architecture=FLUX1_KONTEXT_ID,
    label="Flux.1 Kontext",
    transformer=True,
    native_size=1024,
    folder=Folder(
        pipelines=("FluxKontextPipeline",),
        parts=("transformer", "vae", "scheduler", "text_encoder", "text_encoder_2"),
    ),
    pipeline="FluxKontextPipeline",
    driven_pipelines=("FluxKontextPipeline",),
    driver="app.engine.generation.families.kontext.model:KontextFamily",
    checkpoint_family="flux1-kontext",
    checkpoint_label="Flux.1 Kontext",
    # Guidance-distilled as Flux.1 dev: `cfg` is the model's guidance input, no negative
    # prompt; text to image (no input image) as the stock pipeline, edits and inpaint (the
    # instruction limited to a mask); no img2img.
    requests=replace(
        FLOW_REQUESTS,
        negative_prompt=False,
        distilled_guidance=True,
        img2img=False,
        img2img_refusal=KONTEXT_IMG2IMG_REFUSAL,
        edit=True,
        max_area=MAX_AREA,
        inpaint_sizes=PREFERRED_RESOLUTIONS,  # FluxKontextInpaintPipeline's
    ),
    optional_parts=("image_encoder", "feature_extractor"),  # IP-Adapter's, never shipped
    float16_overflowing_encoders=("text_encoder_2",),  # T5 v1.1 XXL
    transformer_file=TransformerFile(
        markers=("double_blocks.", "single_blocks."),  # Flux.1's: told apart by `claims`
        split_parts=(CLIP_L, T5, VAE),
        read_header=read_header,
        transformer_class="FluxTransformer2DModel",
        components=((CLIP_L, "text_encoder"), (T5, "text_encoder_2")),
        to_diffusers_keys="app.engine.generation.families.flux.keys:flux_to_diffusers",
        claims=claims_file,
    ),
)

FAMILIES = (FLUX1_KONTEXT,)
