"""LTX-Video as the files artists have: Lightricks' all-in-one `ltx-video-2b-v0.9*.safetensors`
(the transformer under `model.diffusion_model.`, the VAE under `vae.`, in Lightricks' own
keys: what diffusers' `convert_ltx_*_checkpoint_to_diffusers` read) beside ComfyUI's
`text_encoders/t5xxl_*.safetensors`, or a GGUF of the transformer beside an LTX-Video VAE
file in `vae/`. What they need is read from their headers (files/transformer_files.py
pairs the parts).

The shipped config folder is chosen by the VAE, as diffusers' `infer_diffusers_model_type`
tells the releases apart: 0.9.0's decoder (no timestep conditioning), 0.9.1's (a
`last_time_embedder`); 0.9.5 on (an encoder ending on 2048 channels) and the 13B
transformers (0.9.7 on: 48 blocks) are refused in one sentence, as Easel ships no configs
for them yet. Torch-free, as detection is.
"""

from __future__ import annotations

from dataclasses import replace

from app.engine.generation.files.registry import Architecture, Shapes
from app.engine.generation.files.transformer_files import LTX_VAE, T5, FileNeeds

CONFIG_090 = "ltx-video-0.9.0"
CONFIG_091 = "ltx-video-0.9.1"
LTX_2B_WIDTH = 2048  # the 2B transformer's hidden size (32 heads of 64); 13B's is 4096
LTX_2B_BLOCKS = 28
_TIME_EMBEDDER = "decoder.last_time_embedder.timestep_embedder.linear_1.weight"  # 0.9.1 on
_ENCODER_OUT = "encoder.conv_out.conv.weight"  # (latents + 1, 2048, ...) from 0.9.5 on
_ENCODER_WIDTH_095 = 2048
FOLDER_ONLY = (
    "{what}; Easel ships the single-file configs of LTX-Video 0.9.0 and 0.9.1 only so far, "
    "so use it as a diffusers folder (with model_index.json, e.g. a copy of {repo})"
)


def read_header(bare: Shapes, name: str) -> FileNeeds | str:
    """What an LTX-Video transformer needs: its T5's width (`caption_projection`), its
    VAE's latent channels (`patchify_proj`: 1x1x1 patches); the 2B transformer only."""
    try:
        width, latents = bare["patchify_proj.weight"]
        text_width = bare["caption_projection.linear_1.weight"][1]
    except (KeyError, IndexError, ValueError):
        return "an incomplete LTX-Video transformer (no patchify_proj or caption_projection)"
    blocks = 1 + max(
        (int(key.split(".")[1]) for key in bare if key.startswith("transformer_blocks.")),
        default=-1,
    )
    if width > LTX_2B_WIDTH or blocks > LTX_2B_BLOCKS:
        what = f"an LTX-Video 13B transformer file ({blocks} blocks {width} wide)"
        return FOLDER_ONLY.format(what=what, repo="Lightricks/LTX-Video-0.9.7-dev")
    ltx = Architecture("ltx-video")
    return FileNeeds(ltx, CONFIG_090, {T5: text_width, LTX_VAE: latents})


def read_vae(needs: FileNeeds, vae: Shapes) -> FileNeeds | str:
    """The release the paired VAE is of (its config folder), as diffusers tells them."""
    encoder_out = vae.get(_ENCODER_OUT, [])
    if len(encoder_out) > 1 and encoder_out[1] == _ENCODER_WIDTH_095:
        what = "an LTX-Video 0.9.5 or later VAE (its encoder ends on 2048 channels)"
        return FOLDER_ONLY.format(what=what, repo="Lightricks/LTX-Video-0.9.5")
    return replace(needs, config_name=CONFIG_091 if _TIME_EMBEDDER in vae else CONFIG_090)
