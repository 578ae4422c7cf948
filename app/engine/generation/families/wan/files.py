"""Wan 2.1 text to video and Wan 2.2 TI2V 5B as ComfyUI's split files: what a transformer
file in Wan-AI's own key layout (`patch_embedding.`, `blocks.N.self_attn.`, `head.head.`;
city96's GGUFs keep it) needs beside it, read from its header (files/transformer_files.py
pairs the parts), and which shipped config folder it loads with. UMT5's tokenizer comes
with the text encoder file or beside it (umt5.py). TI2V 5B's file (48 latent channels)
pairs with Wan 2.2's VAE (`wan2.2_vae.safetensors`, 48 channels too; vae22.py converts its
keys) and loads as Wan 2.2 TI2V, its pipeline's `expand_timesteps` from the shipped
folder's model index. An expert of Wan 2.2 I2V A14B (Wan 2.1 I2V's input channels, no CLIP
image embedding) is Wan 2.2 I2V, run with the shipped two-expert folder beside its twin
(files/expert_files.py pairs them by name).

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
WAN22_LATENTS = 48
WAN_1_3B_WIDTH = 1536  # Wan2.1-T2V-1.3B's hidden size; 14B's is 5120
# The shipped config folders (resources/model_configs, packaging/model_configs/
# make_wan_configs.py), picked from the transformer's shapes as diffusers'
# `infer_diffusers_model_type` picks a hub repository: by width and input channels.
CONFIG_1_3B = "wan2.1-t2v-1.3b"
CONFIG_14B = "wan2.1-t2v-14b"
CONFIG_I2V_480P = "wan2.1-i2v-14b-480p"
CONFIG_I2V_720P = "wan2.1-i2v-14b-720p"
CONFIG_TI2V_5B = "wan2.2-ti2v-5b"
CONFIG_I2V_A14B = "wan2.2-i2v-a14b"  # each expert: Wan 2.1 I2V's shape without CLIP


def config_for(bare: Shapes, name: str) -> str:
    """The shipped config folder of a Wan transformer file (original keys, no prefix), from
    its input and output channels, its width and whether it embeds CLIP's image states: a
    transformer no wider than 1.3B's is read as 1.3B (diffusers' rule), a wider one as 14B;
    Wan 2.1 I2V's 720p release by its name (its shapes are 480p's)."""
    width = bare["patch_embedding.weight"][0]
    out_channels = bare["head.head.weight"][0] // PATCH_PIXELS
    in_channels = prod(bare["patch_embedding.weight"]) // (width * PATCH_PIXELS)
    if out_channels == WAN22_LATENTS:
        return CONFIG_TI2V_5B
    if any(key.startswith("img_emb.") for key in bare):
        return CONFIG_I2V_720P if "720" in name else CONFIG_I2V_480P
    if in_channels != out_channels:  # the image's latents and mask beside the noise
        return CONFIG_I2V_A14B
    return CONFIG_1_3B if width <= WAN_1_3B_WIDTH else CONFIG_14B


def read_header(bare: Shapes, name: str) -> FileNeeds | str:
    """What a Wan transformer file needs (its shipped config, its UMT5's width, its VAE's
    latent channels), or why Easel cannot run it from files. Wan 2.1 I2V's CLIP vision
    file is found by its own declaration (clip_vision.py); Wan 2.2 I2V A14B's experts read
    none."""
    try:
        text_width = bare["text_embedding.0.weight"][1]
        out_channels = bare["head.head.weight"][0] // PATCH_PIXELS
        config = config_for(bare, name)
    except (KeyError, IndexError, ZeroDivisionError):
        return "an incomplete Wan transformer (no patch_embedding, text_embedding or head weights)"
    if config in (CONFIG_I2V_480P, CONFIG_I2V_720P, CONFIG_I2V_A14B):  # CLIP: clip_vision.py
        i2v = Architecture("wan2.2-i2v" if config == CONFIG_I2V_A14B else "wan2.1-i2v")
        return FileNeeds(i2v, config, {UMT5: text_width, WAN_VAE: out_channels})
    # Its VAE's latents are what it draws (16, or TI2V's 48: a Wan VAE of another width is
    # named as a misfit).
    architecture = Architecture("wan2.2-ti2v" if config == CONFIG_TI2V_5B else "wan2.1")
    return FileNeeds(architecture, config, {UMT5: text_width, WAN_VAE: out_channels})
