"""Flux.1 ControlNets as the single files artists keep in `models/controlnet/`.

Two layouts, neither with a config beside it, so the model's shape is read from its tensors:
- diffusers' keys (InstantX's and Shakker-Labs' `diffusion_pytorch_model.safetensors`,
  renamed): `controlnet_x_embedder`, `transformer_blocks.N`, a Union's
  `controlnet_mode_embedder` (one row per control type);
- XLabs' own (`flux-canny-controlnet-v3.safetensors`...): Flux's original double blocks
  (`double_blocks.N`), `controlnet_blocks.N`, `pos_embed_input` and the pixel hint block
  `input_hint_block.{0,2,...,14}` (convolutions between SiLUs). diffusers 0.42 has no
  single-file loader or converter for Flux ControlNets (its Flux transformer converter
  needs single blocks and a final layer, which XLabs' nets lack), so `to_diffusers` maps
  XLabs' keys to `FluxControlNetModel`'s as that converter maps a transformer's double
  blocks, key for key.

Torch-free: the same code reads a header's shapes (at submit, to list and check a file)
and a state dict's tensors (at load); `split` cuts a fused q/k/v either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

Value = TypeVar("Value")
Shape = list[int]

XLABS_MARKER = "input_hint_block."  # beside `double_blocks.`: XLabs' own layout
_UNION_KEY = "controlnet_mode_embedder.weight"

# XLabs' top-level modules -> FluxControlNetModel's (as diffusers' Flux transformer converter).
_XLABS_TOP = {
    "time_in.in_layer.": "time_text_embed.timestep_embedder.linear_1.",
    "time_in.out_layer.": "time_text_embed.timestep_embedder.linear_2.",
    "vector_in.in_layer.": "time_text_embed.text_embedder.linear_1.",
    "vector_in.out_layer.": "time_text_embed.text_embedder.linear_2.",
    "guidance_in.in_layer.": "time_text_embed.guidance_embedder.linear_1.",
    "guidance_in.out_layer.": "time_text_embed.guidance_embedder.linear_2.",
    "txt_in.": "context_embedder.",
    "img_in.": "x_embedder.",
    "pos_embed_input.": "controlnet_x_embedder.",
}
# Inside a double block (`double_blocks.N.` -> `transformer_blocks.N.`).
_XLABS_BLOCK = {
    "img_mod.lin.": "norm1.linear.",
    "txt_mod.lin.": "norm1_context.linear.",
    "img_attn.norm.query_norm.scale": "attn.norm_q.weight",
    "img_attn.norm.key_norm.scale": "attn.norm_k.weight",
    "txt_attn.norm.query_norm.scale": "attn.norm_added_q.weight",
    "txt_attn.norm.key_norm.scale": "attn.norm_added_k.weight",
    "img_mlp.0.": "ff.net.0.proj.",
    "img_mlp.2.": "ff.net.2.",
    "txt_mlp.0.": "ff_context.net.0.proj.",
    "txt_mlp.2.": "ff_context.net.2.",
    "img_attn.proj.": "attn.to_out.0.",
    "txt_attn.proj.": "attn.to_add_out.",
}
_XLABS_QKV = {  # fused q, k, v: cut in three along the output rows
    "img_attn.qkv.": ("attn.to_q.", "attn.to_k.", "attn.to_v."),
    "txt_attn.qkv.": ("attn.add_q_proj.", "attn.add_k_proj.", "attn.add_v_proj."),
}
# XLabs' hint block is one Sequential of 8 convolutions (SiLUs between, at odd places):
# diffusers' `ControlNetConditioningEmbedding` has conv_in, 6 blocks and conv_out.
_HINT_CONVS = ["conv_in", *(f"blocks.{n}" for n in range(6)), "conv_out"]
_XLABS_HINT = {
    f"input_hint_block.{2 * n}.": f"input_hint_block.{name}." for n, name in enumerate(_HINT_CONVS)
}


class UnreadableFluxControlNet(ValueError):
    """A Flux.1 ControlNet file whose tensors do not make a `FluxControlNetModel`."""


def is_flux_controlnet(keys: list[str]) -> bool:
    if "controlnet_x_embedder.weight" in keys:
        return True
    return _has(keys, XLABS_MARKER) and _has(keys, "double_blocks.")


def is_xlabs(keys: list[str]) -> bool:
    return _has(keys, "double_blocks.")


def is_union(keys: list[str]) -> bool:
    return _UNION_KEY in keys


def to_diffusers(
    state: Mapping[str, Value], split: Callable[[Value], list[Value]]
) -> dict[str, Value]:
    """XLabs' keys as `FluxControlNetModel`'s; `split(value)`: a fused q/k/v's three parts.
    A key of no known module is refused, naming it (nothing is dropped silently)."""
    converted: dict[str, Value] = {}
    for key, value in state.items():
        block = re.match(r"double_blocks\.(\d+)\.(.*)", key)
        if block is not None:
            converted.update(_block_keys(int(block[1]), block[2], value, split))
        elif key.startswith("controlnet_blocks."):
            converted[key] = value
        else:
            converted[_renamed(key, {**_XLABS_TOP, **_XLABS_HINT})] = value
    return converted


def _block_keys(
    number: int, rest: str, value: Value, split: Callable[[Value], list[Value]]
) -> dict[str, Value]:
    prefix = f"transformer_blocks.{number}."
    for fused, parts in _XLABS_QKV.items():
        if rest.startswith(fused):
            tail = rest[len(fused) :]
            return {
                prefix + part + tail: piece for part, piece in zip(parts, split(value), strict=True)
            }
    return {prefix + _renamed(rest, _XLABS_BLOCK, f"double_blocks.{number}."): value}


def _renamed(key: str, table: Mapping[str, str], context: str = "") -> str:
    for old, new in table.items():
        if key.startswith(old):
            return new + key[len(old) :]
    raise UnreadableFluxControlNet(f"it has a tensor Easel does not know: {context}{key}")


def split_shape(shape: Shape) -> list[Shape]:
    """A fused q/k/v's shape cut in three, as `to_diffusers` cuts its tensor."""
    return [[shape[0] // 3, *shape[1:]]] * 3


def diffusers_shapes(shapes: Mapping[str, Shape]) -> dict[str, Shape]:
    """A file's tensor shapes under `FluxControlNetModel`'s names, whichever its layout."""
    if is_xlabs(list(shapes)):
        return to_diffusers(shapes, split_shape)
    return dict(shapes)


def config_from_shapes(shapes: Mapping[str, Shape], axes_dims_rope: Any = None) -> dict[str, Any]:
    """The `FluxControlNetModel` config of a file with these (diffusers') tensor shapes;
    `axes_dims_rope` (not in the weights): the model's own, default Flux.1's."""
    try:
        hidden, in_channels = shapes["x_embedder.weight"]
        head = _head_dim(shapes)
        config: dict[str, Any] = {
            "in_channels": in_channels,
            "num_layers": _count(shapes, "transformer_blocks."),
            "num_single_layers": _count(shapes, "single_transformer_blocks."),
            "attention_head_dim": head,
            "num_attention_heads": hidden // head,
            "joint_attention_dim": shapes["context_embedder.weight"][1],
            "pooled_projection_dim": shapes["time_text_embed.text_embedder.linear_1.weight"][1],
            "guidance_embeds": "time_text_embed.guidance_embedder.linear_1.weight" in shapes,
            "num_mode": shapes[_UNION_KEY][0] if _UNION_KEY in shapes else None,
        }
        hint = shapes.get("input_hint_block.conv_out.weight")
        if hint is not None:  # reads pixels in patches of `hint` channels each
            config["conditioning_embedding_channels"] = hint[0]
            config["patch_size"] = round((in_channels // hint[0]) ** 0.5)
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as error:
        raise UnreadableFluxControlNet(
            f"its tensors are not a Flux.1 ControlNet's (no usable {error})"
        ) from error
    if axes_dims_rope is not None:
        config["axes_dims_rope"] = list(axes_dims_rope)
    return config


def _head_dim(shapes: Mapping[str, Shape]) -> int:
    """Each attention head's width: the q norm's (RMSNorm over one head)."""
    for key in (
        "transformer_blocks.0.attn.norm_q.weight",
        "single_transformer_blocks.0.attn.norm_q.weight",
    ):
        if key in shapes:
            return int(shapes[key][0])
    raise KeyError("attention norm")


def _count(shapes: Mapping[str, Shape], prefix: str) -> int:
    numbers = {key[len(prefix) :].split(".")[0] for key in shapes if key.startswith(prefix)}
    return len(numbers)


def _has(keys: list[str], prefix: str) -> bool:
    return any(key.startswith(prefix) for key in keys)
