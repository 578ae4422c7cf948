"""Wan 2.1 text to video as ComfyUI's split files: what a transformer file in Wan-AI's own
key layout (`patch_embedding.`, `blocks.N.self_attn.`, `head.head.`; city96's GGUFs keep
it) needs beside it, read from its header (files/transformer_files.py pairs the parts).

Torch-free, as detection is. Shapes are read through their element counts where a GGUF
may have flattened them: city96's conversions store the 5D patch embedding reshaped, its
true shape in the metadata (`comfy.gguf.orig_shape.<name>`; load/assemble.py restores it).
"""

from __future__ import annotations

from math import prod

from app.engine.generation.files.registry import Architecture, Shapes
from app.engine.generation.files.transformer_files import UMT5, WAN_VAE, FileNeeds

PATCH_PIXELS = 1 * 2 * 2  # Wan's (1, 2, 2) patches
WAN21_LATENTS = 16  # Wan 2.1's VAE; Wan 2.2 TI2V 5B's has 48
WAN_1_3B_WIDTH = 1536  # Wan2.1-T2V-1.3B's hidden size; 14B's is 5120
# The shipped config folder of each size (a transformer no wider than 1.3B's is read as it).
CONFIG_1_3B = "wan2.1-t2v-1.3b"
CONFIG_14B = "wan2.1-t2v-14b"
# Why a real Wan 2.1 file does not load yet: transformers cannot make a tokenizer from a
# text encoder's weights, and Easel ships no UMT5 vocabulary (256,384 SentencePiece pieces).
CONFIGS_NOT_SHIPPED = (
    "Easel cannot run Wan 2.1 from single files yet, as it does not ship the UMT5 tokenizer "
    "(google/umt5-xxl's vocabulary) and configs they load with; use a Wan diffusers folder "
    "such as Wan-AI/Wan2.1-T2V-1.3B-Diffusers"
)
FOLDER_ONLY = (
    "{what}; Easel runs it only as a diffusers folder so far (with model_index.json, e.g. "
    "a copy of {repo})"
)


def read_header(bare: Shapes, name: str) -> FileNeeds | str:
    """What a Wan transformer file needs (its UMT5's width, its VAE's latent channels), or
    why Easel cannot run it from files: the image-to-video and TI2V shapes, folders only."""
    try:
        width = bare["patch_embedding.weight"][0]
        text_width = bare["text_embedding.0.weight"][1]
        out_channels = bare["head.head.weight"][0] // PATCH_PIXELS
        in_channels = prod(bare["patch_embedding.weight"]) // (width * PATCH_PIXELS)
    except (KeyError, IndexError, ZeroDivisionError):
        return "an incomplete Wan transformer (no patch_embedding, text_embedding or head weights)"
    if in_channels != out_channels or any(key.startswith("img_emb.") for key in bare):
        what = "a Wan image-to-video transformer file"
        return FOLDER_ONLY.format(what=what, repo="Wan-AI/Wan2.1-I2V-14B-480P-Diffusers")
    if out_channels != WAN21_LATENTS:
        what = f"a Wan transformer file on {out_channels} latent channels (Wan 2.2 TI2V 5B's)"
        return FOLDER_ONLY.format(what=what, repo="Wan-AI/Wan2.2-TI2V-5B-Diffusers")
    config = CONFIG_1_3B if width <= WAN_1_3B_WIDTH else CONFIG_14B
    wan21 = Architecture("wan2.1")
    return FileNeeds(wan21, config, {UMT5: text_width, WAN_VAE: out_channels})
