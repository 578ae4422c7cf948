"""Wan 2.2's VAE (TI2V 5B's: 48 latent channels, 2x2 pixel patches, residual levels) from
the file artists have: Wan-AI's `Wan2.2_VAE.pth` keys, which ComfyUI's
`wan2.2_vae.safetensors` keeps. diffusers 0.42's single-file code converts only Wan 2.1's
VAE keys (`convert_wan_vae_to_diffusers`: flat decoder levels); Wan 2.2 nests each level's
residual blocks and its resampler (`downsamples.i.downsamples.j`, `upsamples.i.upsamples.j`,
the resampler last, after the level's residual blocks). The renames are those of diffusers'
own script, scripts/convert_wan_to_diffusers.py `convert_vae_22`; the shipped config
folder's `vae/config.json` gives the shape, and the weights must fill it exactly
(load/assemble.py calls `vae` by the TI2V declaration's `part_loaders`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

StateDict = dict[str, torch.Tensor]

# A residual block's layers: Wan-AI's `residual` sequence (norm, SiLU, conv, norm, SiLU,
# dropout, conv) and `shortcut` -> diffusers' names.
_RESNET = (
    ("residual.0.gamma", "norm1.gamma"),
    ("residual.2.", "conv1."),
    ("residual.3.gamma", "norm2.gamma"),
    ("residual.6.", "conv2."),
    ("shortcut.", "conv_shortcut."),
)
_TOP = {"conv1.": "quant_conv.", "conv2.": "post_quant_conv."}
_ENDS = {"conv1.": "conv_in.", "head.0.": "norm_out.", "head.2.": "conv_out."}
_LEVEL = re.compile(
    r"(encoder\.downsamples|decoder\.upsamples)\.(\d+)\.(?:down|up)samples\.(\d+)\.(.*)"
)
_MIDDLE = re.compile(r"(encoder|decoder)\.middle\.(\d)\.(.*)")
_BLOCKS = {"encoder.downsamples": ("encoder.down_blocks", "downsampler"),
           "decoder.upsamples": ("decoder.up_blocks", "upsampler")}  # fmt: skip
_ORIGINAL_MARK = "decoder.middle.0.residual.0.gamma"  # Wan-AI's keys (diffusers': mid_block)


def _resnet(rest: str) -> str:
    for original, renamed in _RESNET:
        if rest.startswith(original):
            return renamed + rest.removeprefix(original)
    return rest


def diffusers_key(key: str) -> str:
    """One Wan 2.2 VAE key of Wan-AI's -> diffusers' `AutoencoderKLWan` (2.2 config)."""
    for original, renamed in _TOP.items():
        if key.startswith(original):
            return renamed + key.removeprefix(original)
    side, _, rest = key.partition(".")
    for original, renamed in _ENDS.items():
        if rest.startswith(original):
            return f"{side}.{renamed}{rest.removeprefix(original)}"
    if match := _MIDDLE.fullmatch(key):  # resnet, attention, resnet
        side, index, tail = match.groups()
        if index == "1":
            return f"{side}.mid_block.attentions.0.{tail}"
        return f"{side}.mid_block.resnets.{int(index) // 2}.{_resnet(tail)}"
    if match := _LEVEL.fullmatch(key):
        blocks, level, index, tail = match.groups()
        renamed_blocks, sampler = _BLOCKS[blocks]
        if tail.startswith(("resample.", "time_conv.")):  # the level's resampler, last
            return f"{renamed_blocks}.{level}.{sampler}.{tail}"
        return f"{renamed_blocks}.{level}.resnets.{index}.{_resnet(tail)}"
    return key


def diffusers_vae_keys(weights: StateDict) -> StateDict:
    """A Wan 2.2 VAE's weights in diffusers' keys (already diffusers': as they are)."""
    if _ORIGINAL_MARK not in weights:
        return weights
    return {diffusers_key(key): value for key, value in weights.items()}


def vae(weights: StateDict, config: Path, component: str, dtype: torch.dtype) -> Any:
    """`AutoencoderKLWan` of the shipped config holding `weights`, every key filled (a VAE
    of another layout fails here, named by the loader, rather than running half random)."""
    from accelerate import init_empty_weights
    from diffusers import AutoencoderKLWan

    state = diffusers_vae_keys(weights)
    settings = AutoencoderKLWan.load_config(config / component, local_files_only=True)
    with init_empty_weights():
        model = AutoencoderKLWan.from_config(settings)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True, assign=True)
    return model.eval()
