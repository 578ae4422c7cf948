"""Wan 2.1 I2V's CLIP image encoder from ComfyUI's file: `clip_vision/clip_vision_h.safetensors`
(open-clip ViT-H/14) beside the models folder's `diffusion_models/`, in transformers' own
key layout (`vision_model.`, `visual_projection.`), which is how ComfyUI stores its CLIP
vision files, or in open-clip's (`visual.transformer.resblocks.`: an open-clip export, which
open_clip_keys.py converts to transformers' as it loads). The I2V transformer's image embedding
states the width it reads (`img_emb.proj.0`, a norm over CLIP's hidden states), so the file
is paired by that width, as the text encoders are. Wan 2.2 I2V A14B's experts have no image
embedding: they need no CLIP file, and their config folder's model index names no encoder.

`find_clip_vision` is the I2V declaration's `find_folders` (torch-free: detection runs it);
`components` its `folder_components` (load/assemble.py): the encoder of the shipped config
folder's `image_encoder/config.json` holding the file's weights, and the shipped
`image_processor` (CLIP's resize, crop and normalisation, as the released repository's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.engine.generation.families.wan.open_clip_keys import (
    OPEN_CLIP_MARKER,
    OPEN_CLIP_WIDTH,
    is_open_clip,
    to_transformers,
)
from app.engine.generation.files.architecture import (
    SAFETENSORS_SUFFIX,
    header_shapes,
    read_safetensors_header,
)
from app.engine.generation.files.transformer_files import (
    CHECKPOINT_FOLDERS,
    DIFFUSION_MODEL_FOLDERS,
    DIFFUSION_PREFIX,
    GGUF_SUFFIX,
    Shapes,
    read_gguf_table,
)

CLIP_VISION_FOLDER = "clip_vision"
IMAGE_ENCODER = "image_encoder"
IMAGE_PROCESSOR = "image_processor"
_IMAGE_NORM = "img_emb.proj.0.weight"  # the transformer's norm over CLIP's states: its width
_CLIP_WIDTH = "vision_model.post_layernorm.weight"
_PROJECTION = "visual_projection.weight"


def find_clip_vision(model_file: Path) -> dict[str, Path] | str:
    """The CLIP vision file in `clip_vision/` of the models folder whose width the
    transformer `model_file` reads (none for a transformer that reads no CLIP states), or
    the sentence saying what to put there."""
    width = _image_width(model_file)
    if not width:  # Wan 2.2 I2V A14B's experts: no image embedding
        return {}
    root = model_file.parent
    if root.name in (*DIFFUSION_MODEL_FOLDERS, *CHECKPOINT_FOLDERS):
        root = root.parent
    folder = root / CLIP_VISION_FOLDER
    misfits: list[str] = []
    for file in _safetensors_in(folder):
        found = _clip_width(_shapes(file))
        if found and found[0] == width:
            return {IMAGE_ENCODER: file}
        if found:
            misfits.append(
                f"{file.name} in {CLIP_VISION_FOLDER}/ is a CLIP vision model {found[0]} wide"
            )
    if misfits:
        return f"{misfits[0]}, but the model reads a CLIP vision model {width} wide"
    return (
        f"needs a CLIP vision model {width} wide in {CLIP_VISION_FOLDER}/ (ComfyUI's "
        "clip_vision_h.safetensors, open-clip ViT-H/14, for Wan 2.1 I2V)"
    )


def _clip_width(shapes: Shapes) -> list[int] | None:
    """The hidden width of a CLIP vision file (its post-layernorm's), either layout."""
    if OPEN_CLIP_MARKER in shapes:
        return shapes.get(OPEN_CLIP_WIDTH)
    return shapes.get(_CLIP_WIDTH)


def _image_width(model_file: Path) -> int:
    if model_file.suffix.lower() == GGUF_SUFFIX:
        shapes, _types = read_gguf_table(model_file)
    else:
        shapes = _shapes(model_file)
    shape = shapes.get(_IMAGE_NORM) or shapes.get(DIFFUSION_PREFIX + _IMAGE_NORM) or [0]
    return shape[0]


def _shapes(file: Path) -> Shapes:
    try:
        return header_shapes(read_safetensors_header(file))
    except ValueError:
        return {}  # a damaged file is no candidate


def _safetensors_in(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix.lower() == SAFETENSORS_SUFFIX)
    except OSError:
        return []


def components(config: Path, folders: dict[str, Path]) -> dict[str, Any]:
    """The image encoder holding the CLIP vision file's weights, and the shipped processor
    (none where no CLIP file was wanted: Wan 2.2 I2V A14B's experts)."""
    import json

    import transformers

    if IMAGE_ENCODER not in folders:
        return {}
    index = json.loads((config / "model_index.json").read_text(encoding="utf-8"))
    processor_class = getattr(transformers, index[IMAGE_PROCESSOR][1])
    processor = processor_class.from_pretrained(config / IMAGE_PROCESSOR, local_files_only=True)
    encoder = _image_encoder(folders[IMAGE_ENCODER], config / IMAGE_ENCODER, index)
    return {IMAGE_ENCODER: encoder, IMAGE_PROCESSOR: processor}


def _image_encoder(file: Path, settings: Path, index: dict[str, Any]) -> Any:
    """The model index's encoder class (`CLIPVisionModelWithProjection`, the released
    repository's), or the bare vision tower where the file holds no projection: the
    pipeline reads CLIP's penultimate hidden states, never the projected embedding."""
    import transformers
    from accelerate import init_empty_weights
    from safetensors.torch import load_file

    weights = load_file(str(file))
    if is_open_clip(weights):
        weights = to_transformers(weights)
    encoder_class = getattr(transformers, index[IMAGE_ENCODER][1])
    if _PROJECTION not in weights:
        encoder_class = transformers.CLIPVisionModel
    config = transformers.CLIPVisionConfig.from_pretrained(settings, local_files_only=True)
    with init_empty_weights(include_buffers=False):
        model = encoder_class._from_config(config)
    model.load_state_dict(weights, strict=True, assign=True)
    return model.eval()
