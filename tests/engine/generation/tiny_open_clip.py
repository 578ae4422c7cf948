"""A CLIP vision file in open-clip's key layout, written from a transformers
`CLIPVisionModelWithProjection`'s state dict: each name as open-clip's `VisionTransformer`
holds it (`visual.conv1`, `visual.class_embedding`, `visual.positional_embedding`,
`visual.ln_pre`/`ln_post`, `visual.transformer.resblocks.N.{ln_1, ln_2, mlp.c_fc,
mlp.c_proj, attn.out_proj}`, query/key/value fused into `attn.in_proj_*`, `visual.proj` =
the projection's weight transposed), and a bit of a text tower beside it, as a whole
open-clip model file has (`token_embedding.weight`, `logit_scale`).

Written here by hand, name by name, independently of Easel's reading the other way
(families/wan/open_clip_keys.py), so that a round trip through both can fail.
"""

from __future__ import annotations

import torch

StateDict = dict[str, torch.Tensor]

_EMBEDDINGS = {
    "vision_model.embeddings.patch_embedding.weight": "visual.conv1.weight",
    "vision_model.embeddings.class_embedding": "visual.class_embedding",
    "vision_model.embeddings.position_embedding.weight": "visual.positional_embedding",
    "vision_model.pre_layrnorm.weight": "visual.ln_pre.weight",
    "vision_model.pre_layrnorm.bias": "visual.ln_pre.bias",
    "vision_model.post_layernorm.weight": "visual.ln_post.weight",
    "vision_model.post_layernorm.bias": "visual.ln_post.bias",
}
_LAYER = {
    "layer_norm1": "ln_1",
    "layer_norm2": "ln_2",
    "mlp.fc1": "mlp.c_fc",
    "mlp.fc2": "mlp.c_proj",
    "self_attn.out_proj": "attn.out_proj",
}


def to_open_clip(state: StateDict, layers: int) -> StateDict:
    """`state` (a `CLIPVisionModelWithProjection`'s) in open-clip's layout, with two text
    tower tensors beside it."""
    out = {open_clip: state[name] for name, open_clip in _EMBEDDINGS.items()}
    out["visual.proj"] = state["visual_projection.weight"].t().contiguous()
    for n in range(layers):
        ours, theirs = f"vision_model.encoder.layers.{n}.", f"visual.transformer.resblocks.{n}."
        for module, open_clip in _LAYER.items():
            for kind in ("weight", "bias"):
                out[f"{theirs}{open_clip}.{kind}"] = state[f"{ours}{module}.{kind}"]
        for kind in ("weight", "bias"):
            qkv = [state[f"{ours}self_attn.{p}_proj.{kind}"] for p in "qkv"]
            out[f"{theirs}attn.in_proj_{kind}"] = torch.cat(qkv, dim=0)
    out["token_embedding.weight"] = torch.zeros(8, 4)  # the text tower: not read
    out["logit_scale"] = torch.tensor(4.6)
    return out
