"""A CLIP vision file in open-clip's key layout (`visual.conv1.weight`,
`visual.transformer.resblocks.N.attn.in_proj_weight`, `visual.proj`: laion's
CLIP-ViT-H-14 `open_clip_model.safetensors`, an open-clip export) read into transformers'
`CLIPVisionModelWithProjection` layout (`vision_model.`, `visual_projection.weight`), as
ComfyUI's CLIP vision file stores it.

The mapping is transformers' own conversion of the original CLIP weights
(models/clip/convert_clip_original_pytorch_to_hf.py, `copy_vison_model_and_projection`:
it copies modules, here written for a state dict): `conv1` is the patch embedding,
`class_embedding` and `positional_embedding` the embeddings', `ln_pre`/`ln_post` the
pre- and post-layernorm, each residual block's `ln_1`/`ln_2`, `mlp.c_fc`/`mlp.c_proj` and
`attn.out_proj` renamed, its fused `attn.in_proj_*` cut in three (query, key, value), and
`proj` transposed into the projection's weight. Keys outside `visual.` (the text tower, the
logit scale) are left out; a visual key the mapping does not know is an error naming it.

Pure names and tensor slicing (torch is imported only by whoever holds the tensors).
"""

from __future__ import annotations

import re
from typing import Any

VISUAL = "visual."
# The key that tells the layout (clip_vision.py looks for it in a file's header).
OPEN_CLIP_MARKER = "visual.transformer.resblocks.0.attn.in_proj_weight"
OPEN_CLIP_WIDTH = "visual.ln_post.weight"  # the width the transformer's image embedding reads

_TOWER = "vision_model."
_RENAMED = {
    "conv1.weight": "embeddings.patch_embedding.weight",
    "class_embedding": "embeddings.class_embedding",
    "positional_embedding": "embeddings.position_embedding.weight",
    "ln_pre.weight": "pre_layrnorm.weight",  # transformers' spelling
    "ln_pre.bias": "pre_layrnorm.bias",
    "ln_post.weight": "post_layernorm.weight",
    "ln_post.bias": "post_layernorm.bias",
}
_BLOCK = re.compile(r"transformer\.resblocks\.(\d+)\.(.+)")
_BLOCK_RENAMED = {
    "ln_1": "layer_norm1",
    "ln_2": "layer_norm2",
    "mlp.c_fc": "mlp.fc1",
    "mlp.c_proj": "mlp.fc2",
    "attn.out_proj": "self_attn.out_proj",
}
_FUSED = "attn.in_proj_"  # + "weight" / "bias": query, key and value stacked
_SPLIT = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
_PROJECTION = "proj"


def is_open_clip(keys: Any) -> bool:
    """Whether a file's keys are open-clip's layout (its vision tower's first block)."""
    return OPEN_CLIP_MARKER in keys


def to_transformers(weights: dict[str, Any]) -> dict[str, Any]:
    """Open-clip's vision tower (and projection) under transformers' CLIP vision names."""
    converted: dict[str, Any] = {}
    for key, tensor in weights.items():
        if key.startswith(VISUAL):
            converted.update(_converted(key.removeprefix(VISUAL), tensor))
    return converted


def _converted(name: str, tensor: Any) -> dict[str, Any]:
    """One open-clip visual tensor (its name without `visual.`) as transformers' tensors."""
    if name == _PROJECTION:  # open-clip multiplies x @ proj; a Linear holds its transpose
        return {"visual_projection.weight": tensor.t().contiguous()}
    if name in _RENAMED:
        return {_TOWER + _RENAMED[name]: tensor}
    block = _BLOCK.fullmatch(name)
    if block is None:
        raise ValueError(f"an open-clip CLIP vision key Easel cannot map: visual.{name}")
    layer, rest = f"{_TOWER}encoder.layers.{block.group(1)}.", block.group(2)
    if rest.startswith(_FUSED):
        kind = rest.removeprefix(_FUSED)  # "weight" or "bias"
        thirds = tensor.chunk(3, dim=0)
        return {
            f"{layer}{split}.{kind}": third for split, third in zip(_SPLIT, thirds, strict=True)
        }
    module, _, kind = rest.rpartition(".")
    if module not in _BLOCK_RENAMED:
        raise ValueError(f"an open-clip CLIP vision key Easel cannot map: visual.{name}")
    return {f"{layer}{_BLOCK_RENAMED[module]}.{kind}": tensor}
