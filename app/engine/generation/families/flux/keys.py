"""Flux.1's transformer keys: Black Forest Labs' layout (the files artists download) to
diffusers' `FluxTransformer2DModel` and back (the back way builds the tests' files).

The same renames, splits and swaps as diffusers' `convert_flux_transformer_checkpoint_to_
diffusers`, which fixes the width at 3072 and so cannot read a smaller model; a test checks
the two agree at the released width. Declared as the family's `to_diffusers_keys`; the
assembler (load/assemble.py) runs it before `from_single_file`.
"""

from __future__ import annotations

from typing import Any

import torch

StateDict = dict[str, torch.Tensor]


def flux_to_diffusers(checkpoint: StateDict, modulated: bool = True) -> StateDict:
    """Black Forest Labs' Flux.1 keys -> diffusers' `FluxTransformer2DModel` keys.

    The conversion of diffusers' `convert_flux_transformer_checkpoint_to_diffusers`, with
    the attention width read from the weights (`img_in`) instead of fixed at 3072.
    `modulated=False`: the blocks without modulation layers of their own (Chroma's, whose
    modulation comes from its `distilled_guidance_layer`: families/chroma/keys.py)."""
    source = {
        key.removeprefix("model.diffusion_model."): value for key, value in checkpoint.items()
    }
    inner = source["img_in.weight"].shape[0]
    out: StateDict = {}

    def move(new: str, old: str) -> None:
        out[new] = source.pop(old)

    for new, old in _FLUX_RENAMES:
        if old in source:
            move(new, old)
    for i in _block_indices(source, "double_blocks."):
        new, old = f"transformer_blocks.{i}.", f"double_blocks.{i}."
        for suffix, original in _double_renames(modulated):
            move(new + suffix, old + original)
        for stream, names in (("img", ("to_q", "to_k", "to_v")), ("txt", _ADDED_QKV)):
            for kind in ("weight", "bias"):
                parts = torch.chunk(source.pop(f"{old}{stream}_attn.qkv.{kind}"), 3, dim=0)
                for name, tensor in zip(names, parts, strict=True):
                    out[f"{new}attn.{name}.{kind}"] = tensor
    for i in _block_indices(source, "single_blocks."):
        new, old = f"single_transformer_blocks.{i}.", f"single_blocks.{i}."
        for suffix, original in _single_renames(modulated):
            move(new + suffix, old + original)
        for kind in ("weight", "bias"):
            linear1 = source.pop(f"{old}linear1.{kind}")
            sizes = [inner, inner, inner, linear1.shape[0] - 3 * inner]
            q, k, v, mlp = torch.split(linear1, sizes, dim=0)
            out[f"{new}attn.to_q.{kind}"], out[f"{new}attn.to_k.{kind}"] = q, k
            out[f"{new}attn.to_v.{kind}"], out[f"{new}proj_mlp.{kind}"] = v, mlp
    for kind in ("weight", "bias"):
        out[f"proj_out.{kind}"] = source.pop(f"final_layer.linear.{kind}")
        if modulated:
            shift, scale = source.pop(f"final_layer.adaLN_modulation.1.{kind}").chunk(2, dim=0)
            out[f"norm_out.linear.{kind}"] = torch.cat([scale, shift], dim=0)
    return out


def flux_from_diffusers(state: StateDict, modulated: bool = True) -> StateDict:
    """The inverse of `flux_to_diffusers`: diffusers' keys -> Black Forest Labs' layout."""
    source = dict(state)
    out: StateDict = {}
    for new, old in _FLUX_RENAMES:
        if new in source:
            out[old] = source.pop(new)
    for i in _block_indices(source, "transformer_blocks."):
        new, old = f"transformer_blocks.{i}.", f"double_blocks.{i}."
        for suffix, original in _double_renames(modulated):
            out[old + original] = source.pop(new + suffix)
        for stream, names in (("img", ("to_q", "to_k", "to_v")), ("txt", _ADDED_QKV)):
            for kind in ("weight", "bias"):
                qkv = [source.pop(f"{new}attn.{name}.{kind}") for name in names]
                out[f"{old}{stream}_attn.qkv.{kind}"] = torch.cat(qkv, dim=0)
    for i in _block_indices(source, "single_transformer_blocks."):
        new, old = f"single_transformer_blocks.{i}.", f"single_blocks.{i}."
        for suffix, original in _single_renames(modulated):
            out[old + original] = source.pop(new + suffix)
        for kind in ("weight", "bias"):
            linear1_names = ("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp")
            out[f"{old}linear1.{kind}"] = torch.cat(
                [source.pop(f"{new}{name}.{kind}") for name in linear1_names], dim=0
            )
    for kind in ("weight", "bias"):
        out[f"final_layer.linear.{kind}"] = source.pop(f"proj_out.{kind}")
        if modulated:
            scale, shift = source.pop(f"norm_out.linear.{kind}").chunk(2, dim=0)
            out[f"final_layer.adaLN_modulation.1.{kind}"] = torch.cat([shift, scale], dim=0)
    if source:
        raise ValueError(f"keys not in the Flux layout: {sorted(source)[:5]}")
    return out


def _block_indices(keys: Any, prefix: str) -> list[int]:
    return sorted(
        {int(key[len(prefix) :].split(".", 1)[0]) for key in keys if key.startswith(prefix)}
    )


_ADDED_QKV = ("add_q_proj", "add_k_proj", "add_v_proj")


def _pairs(new: str, old: str) -> list[tuple[str, str]]:
    return [(f"{new}.weight", f"{old}.weight"), (f"{new}.bias", f"{old}.bias")]


_FLUX_RENAMES = [
    *_pairs("time_text_embed.timestep_embedder.linear_1", "time_in.in_layer"),
    *_pairs("time_text_embed.timestep_embedder.linear_2", "time_in.out_layer"),
    *_pairs("time_text_embed.text_embedder.linear_1", "vector_in.in_layer"),
    *_pairs("time_text_embed.text_embedder.linear_2", "vector_in.out_layer"),
    *_pairs("time_text_embed.guidance_embedder.linear_1", "guidance_in.in_layer"),
    *_pairs("time_text_embed.guidance_embedder.linear_2", "guidance_in.out_layer"),
    *_pairs("context_embedder", "txt_in"),
    *_pairs("x_embedder", "img_in"),
]
_FLUX_DOUBLE_RENAMES = [
    *_pairs("norm1.linear", "img_mod.lin"),
    *_pairs("norm1_context.linear", "txt_mod.lin"),
    ("attn.norm_q.weight", "img_attn.norm.query_norm.scale"),
    ("attn.norm_k.weight", "img_attn.norm.key_norm.scale"),
    ("attn.norm_added_q.weight", "txt_attn.norm.query_norm.scale"),
    ("attn.norm_added_k.weight", "txt_attn.norm.key_norm.scale"),
    *_pairs("ff.net.0.proj", "img_mlp.0"),
    *_pairs("ff.net.2", "img_mlp.2"),
    *_pairs("ff_context.net.0.proj", "txt_mlp.0"),
    *_pairs("ff_context.net.2", "txt_mlp.2"),
    *_pairs("attn.to_out.0", "img_attn.proj"),
    *_pairs("attn.to_add_out", "txt_attn.proj"),
]
_FLUX_SINGLE_RENAMES = [
    *_pairs("norm.linear", "modulation.lin"),
    ("attn.norm_q.weight", "norm.query_norm.scale"),
    ("attn.norm_k.weight", "norm.key_norm.scale"),
    *_pairs("proj_out", "linear2"),
]


_MODULATION = ("img_mod.", "txt_mod.", "modulation.")


def _double_renames(modulated: bool) -> list[tuple[str, str]]:
    return [r for r in _FLUX_DOUBLE_RENAMES if modulated or not r[1].startswith(_MODULATION)]


def _single_renames(modulated: bool) -> list[tuple[str, str]]:
    return [r for r in _FLUX_SINGLE_RENAMES if modulated or not r[1].startswith(_MODULATION)]
