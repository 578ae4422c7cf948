"""Flux.1 (dev and schnell): a transformer on packed latents, CLIP-L + T5-XXL; `model.py`
drives it as `FluxPipeline` (and its img2img and inpaint pipelines) do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from app.engine.generation.families.flow_params import FLOW_REQUESTS
from app.engine.generation.files.registry import (
    Architecture,
    FamilySpec,
    Folder,
    FolderConfigs,
    Guidance,
    Shapes,
    TransformerFile,
)
from app.engine.generation.files.transformer_files import CLIP_L, T5, VAE, FileNeeds
from app.engine.jobs.params import FLUX_UNION_TYPES

# The ids it stores and is asked by (`Architecture.FLUX1`).
FLUX1_ID = Architecture.declare("flux1", released="2024-08")


# Flux.1 Fill (families/flux_fill) is Flux.1's transformer with a wider input: told apart
# here, where a Flux folder or file is recognised.
FILL_FILE_REFUSAL = (
    "a Flux.1 Fill transformer file, which Easel runs only as a diffusers folder (with "
    "model_index.json, e.g. a copy of black-forest-labs/FLUX.1-Fill-dev)"
)


def fill_in_channels(latent_channels: int, vae_scale_factor: int) -> int:
    """A Fill transformer's input width: its latents, the masked picture's latents (each in
    2x2 patches) and the mask, one channel per pixel of a patch (384 for FLUX.1-Fill-dev:
    64 + 64 + 4 x 8 x 8)."""
    return 2 * 4 * latent_channels + 4 * vae_scale_factor * vae_scale_factor


def is_fill_transformer(transformer: Mapping[str, Any], vae: Mapping[str, Any]) -> bool:
    """Whether a Flux transformer config (beside its VAE's) is Fill's, by its input width."""
    latent_channels = int(vae.get("latent_channels", 16))
    vae_scale_factor = 2 ** (len(vae.get("block_out_channels", [0] * 4)) - 1)
    in_channels = int(transformer.get("in_channels", 4 * latent_channels))
    return in_channels == fill_in_channels(latent_channels, vae_scale_factor)


def claims_fill(configs: FolderConfigs) -> bool:
    """A `FluxFillPipeline` folder, or a `FluxPipeline` one over a Fill transformer."""
    if configs.get("model_index.json", {}).get("_class_name") == "FluxFillPipeline":
        return True
    return is_fill_transformer(configs.get("transformer", {}), configs.get("vae", {}))


def flux_widths(bare: Shapes) -> dict[str, int] | str:
    """What a Flux.1-layout transformer (Black Forest Labs' keys; Kontext's too) needs: its
    text encoders' widths from its input layers, its VAE's latent channels; or why not."""
    try:
        in_channels = bare["img_in.weight"][1]
        widths = {
            CLIP_L: bare["vector_in.in_layer.weight"][1],
            T5: bare["txt_in.weight"][1],
            VAE: in_channels // 4,  # 2 x 2 patches of the latents, packed
        }
    except (KeyError, IndexError):
        return "an incomplete Flux transformer (no img_in, txt_in or vector_in weights)"
    if in_channels == fill_in_channels(16, 8):  # FLUX.1-Fill-dev's, with Flux's VAE
        return FILL_FILE_REFUSAL
    return widths


def read_header(bare: Shapes, name: str) -> FileNeeds | str:
    """A Flux.1 transformer's needs (`flux_widths`); dev has a guidance input."""
    widths = flux_widths(bare)
    if isinstance(widths, str):
        return widths
    dev = "guidance_in.in_layer.weight" in bare
    return FileNeeds(FLUX1_ID, "flux1-dev" if dev else "flux1-schnell", widths)


FLUX1 = FamilySpec(
    architecture=FLUX1_ID,
    label="Flux.1",
    transformer=True,
    native_size=1024,
    # Flux cannot run without T5 (text_encoder_2).
    folder=Folder(
        pipelines=("FluxPipeline",),
        parts=("transformer", "vae", "scheduler", "text_encoder", "text_encoder_2"),
        claims=lambda configs: not claims_fill(configs),  # Fill's transformer: Flux.1 Fill
    ),
    pipeline="FluxPipeline",
    driven_pipelines=("FluxPipeline", "FluxImg2ImgPipeline", "FluxInpaintPipeline"),
    driver="app.engine.generation.families.flux.model:FluxFamily",
    checkpoint_family="flux",
    checkpoint_label="Flux.1",
    step_cache=True,
    attention_backends=True,  # FluxAttnProcessor dispatches, with no mask in our loop
    # `cfg` is the distilled guidance dev takes as an input; no true CFG, so a negative
    # prompt would change nothing: refused rather than silently dropped.
    # Reference images through a Redux model (flux/redux.py), not an IP-Adapter.
    requests=replace(
        FLOW_REQUESTS, negative_prompt=False, distilled_guidance=True, redux_references=True
    ),
    transformer_file=TransformerFile(
        markers=("double_blocks.", "single_blocks."),
        split_parts=(CLIP_L, T5, VAE),
        read_header=read_header,
        transformer_class="FluxTransformer2DModel",
        components=((CLIP_L, "text_encoder"), (T5, "text_encoder_2")),
        to_diffusers_keys="app.engine.generation.families.flux.keys:flux_to_diffusers",
    ),
    float16_overflowing_encoders=("text_encoder_2",),  # T5 v1.1 XXL
    # Its ControlNets are `FluxControlNetModel` folders (a Union one has `num_mode`).
    # (InstantX, XLabs and Shakker-Labs publish them so; guidance/controlnets.py and
    # flux_control.py load and drive them.)
    guidance=Guidance(controlnet_class="FluxControlNetModel", union_types=FLUX_UNION_TYPES),
)

FAMILIES = (FLUX1,)
