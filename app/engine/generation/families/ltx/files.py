"""LTX-Video as the files artists have: Lightricks' all-in-one `ltx-video-2b-v0.9*.safetensors`
and `ltxv-13b-0.9.*.safetensors` (the transformer under `model.diffusion_model.`, the VAE
under `vae.`, in Lightricks' own keys: what diffusers' `convert_ltx_*_checkpoint_to_diffusers`
read) beside ComfyUI's `text_encoders/t5xxl_*.safetensors`, or a GGUF of the transformer
beside an LTX-Video VAE file in `vae/`. What they need is read from their headers
(files/transformer_files.py pairs the parts).

The shipped config folder is chosen as diffusers' `infer_diffusers_model_type` tells the
releases apart: the transformer's size (13B, 0.9.7 on: 48 blocks 4096 wide), then the VAE:
0.9.0's decoder (no timestep conditioning), 0.9.1's (a `last_time_embedder`), 0.9.5's (an
encoder ending on 2048 channels; 0.9.7 and 0.9.8 have the same). A 0.9.5+ VAE makes the
files the `ltx-condition` family (`LTXConditionPipeline`, as their folders say); a 13B
transformer needs such a VAE. Torch-free, as detection is.
"""

from __future__ import annotations

from dataclasses import replace

from app.engine.generation.files.registry import Architecture, Shapes
from app.engine.generation.files.transformer_files import LTX_VAE, T5, FileNeeds

LTX_VIDEO = "ltx-video"  # the families' names (declared in __init__.py, which imports this)
LTX_CONDITION = "ltx-condition"
CONFIG_090 = "ltx-video-0.9.0"
CONFIG_091 = "ltx-video-0.9.1"
CONFIG_095 = "ltx-video-0.9.5"  # the 2B transformer with 0.9.5's VAE (0.9.5, 0.9.6, 0.9.8 2B)
CONFIG_13B = "ltx-video-0.9.7-13b"  # the 13B transformer with that VAE (0.9.7, 0.9.8 13B)
LTX_2B_WIDTH = 2048  # the 2B transformer's hidden size (32 heads of 64); 13B's is 4096
LTX_2B_BLOCKS = 28
_TIME_EMBEDDER = "decoder.last_time_embedder.timestep_embedder.linear_1.weight"  # 0.9.1 on
_ENCODER_OUT = "encoder.conv_out.conv.weight"  # (latents + 1, 2048, ...) from 0.9.5 on
_ENCODER_WIDTH_095 = 2048


def read_header(bare: Shapes, name: str) -> FileNeeds | str:
    """What an LTX-Video transformer needs: its T5's width (`caption_projection`), its
    VAE's latent channels (`patchify_proj`: 1x1x1 patches); the config folder of its size
    (the 2B's is settled by the VAE, `read_vae`)."""
    try:
        width, latents = bare["patchify_proj.weight"]
        text_width = bare["caption_projection.linear_1.weight"][1]
    except (KeyError, IndexError, ValueError):
        return "an incomplete LTX-Video transformer (no patchify_proj or caption_projection)"
    blocks = 1 + max(
        (int(key.split(".")[1]) for key in bare if key.startswith("transformer_blocks.")),
        default=-1,
    )
    config = CONFIG_13B if width > LTX_2B_WIDTH or blocks > LTX_2B_BLOCKS else CONFIG_090
    return FileNeeds(Architecture(LTX_VIDEO), config, {T5: text_width, LTX_VAE: latents})


def read_vae(needs: FileNeeds, vae: Shapes) -> FileNeeds | str:
    """The release the paired VAE is of (its config folder and family), as diffusers tells
    them; a 13B transformer beside an older VAE is refused."""
    encoder_out = vae.get(_ENCODER_OUT, [])
    if len(encoder_out) > 1 and encoder_out[1] == _ENCODER_WIDTH_095:
        config = CONFIG_13B if needs.config_name == CONFIG_13B else CONFIG_095
        return replace(needs, architecture=Architecture(LTX_CONDITION), config_name=config)
    if needs.config_name == CONFIG_13B:
        return (
            "an LTX-Video 13B transformer needs the VAE of LTX-Video 0.9.7 or later (its "
            "encoder ends on 2048 channels), but its VAE is an older one (0.9.0 or 0.9.1)"
        )
    return replace(needs, config_name=CONFIG_091 if _TIME_EMBEDDER in vae else CONFIG_090)


def never_claims(_keys: list[str], _name: str) -> bool:
    """`ltx-condition` declares LTX-Video's files for loading (assemble.py reads the
    declaration of the family detected); detection finds them as LTX-Video's (`read_vae`)."""
    return False
