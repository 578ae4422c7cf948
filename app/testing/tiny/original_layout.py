"""Diffusers pipelines -> one state dict with the original (LDM / A1111) key names.

The inverse of diffusers' single-file conversion (`diffusers.loaders.single_file_utils`),
written from its mapping tables: it lets tests and benchmarks write tiny random models as
the `.safetensors` checkpoints artists download (`model.diffusion_model.*`,
`first_stage_model.*`, `cond_stage_model.*` / `conditioner.embedders.*`) and check that
loading them gives the very pipeline they came from.
"""

from __future__ import annotations

import re
from typing import Any

import torch

UNET = "model.diffusion_model."
VAE = "first_stage_model."

_UNET_TOP = {
    "time_embedding.linear_1": "time_embed.0",
    "time_embedding.linear_2": "time_embed.2",
    "add_embedding.linear_1": "label_emb.0.0",
    "add_embedding.linear_2": "label_emb.0.2",
    "conv_in": "input_blocks.0.0",
    "conv_norm_out": "out.0",
    "conv_out": "out.2",
}
_RESNET = (
    ("norm1", "in_layers.0"),
    ("conv1", "in_layers.2"),
    ("norm2", "out_layers.0"),
    ("conv2", "out_layers.3"),
    ("time_emb_proj", "emb_layers.1"),
    ("conv_shortcut", "skip_connection"),
)
_VAE_ATTENTION = (
    ("group_norm", "norm"),
    ("to_q", "q"),
    ("to_k", "k"),
    ("to_v", "v"),
    ("to_out.0", "proj_out"),
)


def pipeline_to_original(pipe: Any) -> dict[str, torch.Tensor]:
    """The whole pipeline (UNet, VAE, text encoder(s)) as one original-layout state dict."""
    state = {}
    state.update(unet_to_original(pipe.unet.state_dict(), pipe.unet.config))
    state.update(vae_to_original(pipe.vae.state_dict(), len(pipe.vae.config.block_out_channels)))
    encoder = _with_text_model_prefix(pipe.text_encoder.state_dict())
    if hasattr(pipe, "text_encoder_2"):  # SDXL: CLIP ViT-L as is, OpenCLIP ViT-bigG converted
        state.update(_prefixed(encoder, "conditioner.embedders.0.transformer."))
        state.update(
            open_clip_to_original(
                _with_text_model_prefix(pipe.text_encoder_2.state_dict()),
                "conditioner.embedders.1.model.",
            )
        )
    elif pipe.text_encoder.config.hidden_act == "gelu":  # SD 2.x: OpenCLIP ViT-H
        state.update(open_clip_to_original(encoder, "cond_stage_model.model."))
    else:
        state.update(_prefixed(encoder, "cond_stage_model.transformer."))
    return {key: value.detach().contiguous() for key, value in state.items()}


def unet_to_original(state: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    per_block = int(config.layers_per_block) + 1  # resnets (+ attentions) and a down/up sampler
    up_with_attention = {
        index for index, kind in enumerate(config.up_block_types) if "CrossAttn" in kind
    }
    renamed = {}
    for key, value in state.items():
        renamed[UNET + _unet_key(key, per_block, up_with_attention)] = value
    return renamed


def _unet_key(key: str, per_block: int, up_with_attention: set[int]) -> str:
    for new, old in _UNET_TOP.items():
        if key.startswith(new + "."):
            return old + key[len(new) :]
    if match := re.match(r"down_blocks\.(\d+)\.(resnets|attentions)\.(\d+)\.(.*)", key):
        block, kind, layer, rest = match.groups()
        index = 1 + int(block) * per_block + int(layer)
        return f"input_blocks.{index}.{_part(kind, rest)}"
    if match := re.match(r"down_blocks\.(\d+)\.downsamplers\.0\.conv\.(.*)", key):
        block, rest = match.groups()
        return f"input_blocks.{(int(block) + 1) * per_block}.0.op.{rest}"
    if match := re.match(r"mid_block\.(resnets|attentions)\.(\d+)\.(.*)", key):
        kind, layer, rest = match.groups()
        index = 2 * int(layer) if kind == "resnets" else 1
        return f"middle_block.{index}.{_resnet(rest) if kind == 'resnets' else rest}"
    if match := re.match(r"up_blocks\.(\d+)\.(resnets|attentions)\.(\d+)\.(.*)", key):
        block, kind, layer, rest = match.groups()
        return f"output_blocks.{int(block) * per_block + int(layer)}.{_part(kind, rest)}"
    if match := re.match(r"up_blocks\.(\d+)\.upsamplers\.0\.conv\.(.*)", key):
        block, rest = match.groups()
        slot = 2 if int(block) in up_with_attention else 1
        return f"output_blocks.{int(block) * per_block + per_block - 1}.{slot}.conv.{rest}"
    raise ValueError(f"no original name for UNet weight {key!r}")


def _part(kind: str, rest: str) -> str:
    return f"0.{_resnet(rest)}" if kind == "resnets" else f"1.{rest}"


def _resnet(rest: str) -> str:
    for new, old in _RESNET:
        if rest.startswith(new + "."):
            return old + rest[len(new) :]
    return rest


def vae_to_original(state: dict[str, torch.Tensor], levels: int) -> dict[str, torch.Tensor]:
    renamed = {}
    for key, value in state.items():
        new_key, is_attention = _vae_key(key, levels)
        if is_attention and value.ndim == 2:
            value = value[:, :, None, None]  # the original attention uses 1x1 convolutions
        renamed[VAE + new_key] = value
    return renamed


def _vae_key(key: str, levels: int) -> tuple[str, bool]:
    key = key.replace("conv_norm_out", "norm_out")
    if match := re.match(r"(encoder|decoder)\.mid_block\.attentions\.0\.(.*)", key):
        part, rest = match.groups()
        for new, old in _VAE_ATTENTION:
            if rest.startswith(new + "."):
                rest = old + rest[len(new) :]
        return f"{part}.mid.attn_1.{rest}", True
    if match := re.match(r"(encoder|decoder)\.mid_block\.resnets\.(\d+)\.(.*)", key):
        part, layer, rest = match.groups()
        return f"{part}.mid.block_{int(layer) + 1}.{_vae_resnet(rest)}", False
    if match := re.match(r"encoder\.down_blocks\.(\d+)\.resnets\.(\d+)\.(.*)", key):
        level, layer, rest = match.groups()
        return f"encoder.down.{level}.block.{layer}.{_vae_resnet(rest)}", False
    if match := re.match(r"encoder\.down_blocks\.(\d+)\.downsamplers\.0\.conv\.(.*)", key):
        level, rest = match.groups()
        return f"encoder.down.{level}.downsample.conv.{rest}", False
    if match := re.match(r"decoder\.up_blocks\.(\d+)\.resnets\.(\d+)\.(.*)", key):
        level, layer, rest = match.groups()  # the original counts decoder levels upwards
        return f"decoder.up.{levels - 1 - int(level)}.block.{layer}.{_vae_resnet(rest)}", False
    if match := re.match(r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.conv\.(.*)", key):
        level, rest = match.groups()
        return f"decoder.up.{levels - 1 - int(level)}.upsample.conv.{rest}", False
    return key, False


def _vae_resnet(rest: str) -> str:
    return rest.replace("conv_shortcut", "nin_shortcut")


def open_clip_to_original(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """A transformers CLIP text model as OpenCLIP names it (fused q/k/v, `resblocks`)."""
    top = {
        "text_model.embeddings.position_embedding.weight": "positional_embedding",
        "text_model.embeddings.token_embedding.weight": "token_embedding.weight",
        "text_model.final_layer_norm.weight": "ln_final.weight",
        "text_model.final_layer_norm.bias": "ln_final.bias",
    }
    renamed: dict[str, torch.Tensor] = {}
    fused: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        if key in top:
            renamed[prefix + top[key]] = value
        elif key == "text_projection.weight":
            renamed[prefix + "text_projection"] = value.T
        elif match := re.match(r"text_model\.encoder\.layers\.(\d+)\.(.*)", key):
            layer, rest = match.groups()
            base = f"{prefix}transformer.resblocks.{layer}."
            if qkv := re.match(r"self_attn\.(q|k|v)_proj\.(weight|bias)", rest):
                fused.setdefault(f"{base}attn.in_proj_{qkv.group(2)}", {})[qkv.group(1)] = value
                continue
            rest = (
                rest.replace("layer_norm1", "ln_1")
                .replace("layer_norm2", "ln_2")
                .replace("mlp.fc1", "mlp.c_fc")
                .replace("mlp.fc2", "mlp.c_proj")
                .replace("self_attn.out_proj", "attn.out_proj")
            )
            renamed[base + rest] = value
    for key, parts in fused.items():
        renamed[key] = torch.cat([parts["q"], parts["k"], parts["v"]])
    return renamed


def _with_text_model_prefix(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers 5 drops the `text_model.` level from CLIPTextModel's own state dict;
    every file format (diffusers folders, original checkpoints) keeps it."""
    return {
        key if key.startswith(("text_model.", "text_projection")) else f"text_model.{key}": value
        for key, value in state.items()
    }


def _prefixed(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {prefix + key: value for key, value in state.items()}


CONTROLNET = "control_model."
_HINT_OUT = 14  # the condition embedding's last convolution, after its blocks (0, 2, ... 12)


def controlnet_to_original(net: Any) -> dict[str, torch.Tensor]:
    """A diffusers `ControlNetModel` as the original ControlNet file's state dict
    (`control_model.*`: the UNet's encoder half, `input_hint_block`, `zero_convs`,
    `middle_block_out`), as A1111's and ComfyUI's `models/controlnet/` hold them."""
    per_block = int(net.config.layers_per_block) + 1
    renamed = {}
    for key, value in net.state_dict().items():
        renamed[CONTROLNET + _controlnet_key(key, per_block)] = value
    return renamed


def _controlnet_key(key: str, per_block: int) -> str:
    if match := re.match(r"controlnet_cond_embedding\.(conv_in|conv_out|blocks\.(\d+))\.(.*)", key):
        part, block, rest = match.groups()
        index = 0 if part == "conv_in" else _HINT_OUT if part == "conv_out" else 2 * int(block) + 2
        return f"input_hint_block.{index}.{rest}"
    if match := re.match(r"controlnet_down_blocks\.(\d+)\.(.*)", key):
        return f"zero_convs.{match.group(1)}.0.{match.group(2)}"
    if key.startswith("controlnet_mid_block."):
        return "middle_block_out.0." + key.removeprefix("controlnet_mid_block.")
    return _unet_key(key, per_block, set())
