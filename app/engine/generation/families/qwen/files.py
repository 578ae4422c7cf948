"""Qwen-Image, Qwen-Image-Edit and Edit Plus as the files artists have: ComfyUI's split
layout (`diffusion_models/qwen_image_*.safetensors`, bf16 or fp8 e4m3fn, and city96's /
QuantStack's GGUFs of it) beside `text_encoders/qwen_2.5_vl_7b*.safetensors` and
`vae/qwen_image_vae.safetensors`; what a diffusion model file needs, read from its header.

Torch-free, as detection is. The transformer's keys are diffusers' own (`txt_norm.` is
Qwen-Image's alone), and Qwen-Image's, Edit's and Edit Plus's tensors are the same names
and shapes (the edit models read the input image's latents as more tokens of the same
width), so which one a file is, is read from its name, as Flux.1 Kontext's is:
"edit" makes it Qwen-Image-Edit, with "2509", "2511" or "plus" Edit Plus.

Qwen2.5's tokenizer (151,643 BPE tokens) is in none of these files (ComfyUI ships it in its
own source tree), so a `tokenizer/` folder is looked for beside them, or a Hugging Face
cache snapshot of a Qwen-Image or Qwen2.5-VL repository; without one the file is refused in
one sentence saying where to put it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from app.engine.generation.files.registry import Architecture, Shapes
from app.engine.generation.files.transformer_files import (
    CHECKPOINT_FOLDERS,
    DIFFUSION_MODEL_FOLDERS,
    QWEN_VL,
    TEXT_ENCODER_FOLDERS,
    WAN_VAE,
    FileNeeds,
)

PATCH_PIXELS = 2 * 2  # the transformer's 2x2 patches of latents
TOKENIZER = "tokenizer"
# Where a tokenizer folder is looked for, in each of the models folder's text encoder
# folders and the models folder itself: a copy of Qwen/Qwen-Image's `tokenizer/`, or of
# ComfyUI's `comfy/text_encoders/qwen25_tokenizer/` (the same vocabulary).
TOKENIZER_FOLDERS = (TOKENIZER, "qwen25_tokenizer")
# Hub repositories whose snapshots hold Qwen2.5's tokenizer: in `tokenizer/` (the pipelines',
# Edit's `processor/` too) or at the top (Qwen2.5-VL's own).
TOKENIZER_REPOS = (
    "Qwen/Qwen-Image",
    "Qwen/Qwen-Image-2512",
    "Qwen/Qwen-Image-Edit",
    "Qwen/Qwen-Image-Edit-2509",
    "Qwen/Qwen-Image-Edit-2511",
    "Qwen/Qwen2.5-VL-7B-Instruct",
)
NO_TOKENIZER = (
    "needs Qwen2.5-VL's tokenizer, which its text encoder file does not carry; put a copy of "
    "Qwen/Qwen-Image's tokenizer folder (vocab.json, merges.txt, tokenizer_config.json) in "
    "text_encoders/tokenizer/, or download Qwen/Qwen-Image to the Hugging Face cache"
)

# The shipped config folder of each (resources/model_configs), and the family it is.
CONFIG_IMAGE = "qwen-image"
CONFIG_EDIT = "qwen-image-edit"
CONFIG_EDIT_2509 = "qwen-image-edit-2509"
CONFIG_EDIT_2511 = "qwen-image-edit-2511"  # its transformer's `zero_cond_t`
_FAMILY_OF_CONFIG = {
    CONFIG_IMAGE: "qwen-image",
    CONFIG_EDIT: "qwen-image-edit",
    CONFIG_EDIT_2509: "qwen-image-edit-plus",
    CONFIG_EDIT_2511: "qwen-image-edit-plus",
}


def config_of_name(name: str) -> str:
    """The shipped config a Qwen-Image transformer file called `name` loads with: the
    released files say what they are only in their names (`qwen_image_edit_2509_bf16`,
    `Qwen-Image-Edit-2509-Q8_0`, `qwen_image_2512_fp8_e4m3fn`)."""
    lowered = name.lower()
    if "edit" not in lowered:
        return CONFIG_IMAGE
    words = set(re.split(r"[^a-z0-9]+", lowered))
    if "2511" in words:
        return CONFIG_EDIT_2511
    if "2509" in words or "plus" in words:
        return CONFIG_EDIT_2509
    return CONFIG_EDIT


def claims(family: str) -> Callable[[list[str], str], bool]:
    """The `TransformerFile.claims` of `family` ("qwen-image-edit", ...): a file with
    Qwen-Image's keys whose name makes it that family's."""

    def claims_file(bare: list[str], name: str) -> bool:
        return _FAMILY_OF_CONFIG[config_of_name(name)] == family

    return claims_file


def read_header(bare: Shapes, name: str) -> FileNeeds | str:
    """What a Qwen-Image transformer needs: its Qwen2.5-VL's width (`txt_in`), its VAE's
    latent channels (`img_in`: 2x2 patches); which model it is, by its name."""
    try:
        text_width = bare["txt_in.weight"][1]
        latents = bare["img_in.weight"][1] // PATCH_PIXELS
    except (KeyError, IndexError):
        return "an incomplete Qwen-Image transformer (no img_in or txt_in weights)"
    config = config_of_name(name)
    architecture = Architecture(_FAMILY_OF_CONFIG[config])
    return FileNeeds(architecture, config, {QWEN_VL: text_width, WAN_VAE: latents})


def find_tokenizer(model_file: Path) -> dict[str, Path] | str:
    """{"tokenizer": folder} for a Qwen-Image diffusion model file, or why there is none."""
    for folder in [*_beside(model_file), *_in_hf_cache()]:
        if _is_tokenizer(folder):
            return {TOKENIZER: folder}
    return NO_TOKENIZER


def _beside(model_file: Path) -> list[Path]:
    root = model_file.parent
    if root.name in (*DIFFUSION_MODEL_FOLDERS, *CHECKPOINT_FOLDERS):
        root = root.parent
    bases = [root / folder for folder in TEXT_ENCODER_FOLDERS] + [root, model_file.parent]
    return [base / name for base in dict.fromkeys(bases) for name in TOKENIZER_FOLDERS]


def _in_hf_cache() -> list[Path]:
    from app.engine.generation.files.sources import hf_cache_dirs  # sources imports files/

    found = []
    for cache in hf_cache_dirs():
        for repo in TOKENIZER_REPOS:
            snapshots = cache / ("models--" + repo.replace("/", "--")) / "snapshots"
            for snapshot in _children(snapshots):
                found += [snapshot / TOKENIZER, snapshot / "processor", snapshot]
    return found


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(child for child in folder.iterdir() if child.is_dir())
    except OSError:
        return []


def _is_tokenizer(folder: Path) -> bool:
    """A Qwen2 tokenizer folder: its BPE vocabulary and merges, or one tokenizer.json."""
    has_bpe = (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file()
    return has_bpe or (folder / "tokenizer.json").is_file()
