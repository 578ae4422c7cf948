"""ComfyUI's scaled fp8 weights as plain ones: what load/assemble.py (diffusion models and
T5/UMT5 text encoders) and the families that build their own text encoders
(families/qwen/loading.py: Qwen2.5-VL) dequantise alike. A module of its own below both:
families must not import load/ (load/ imports families/)."""

from __future__ import annotations

import torch

from app.engine.generation.files.transformer_files import FP8_SCALES

StateDict = dict[str, torch.Tensor]

SCALED_FP8_MARK = "scaled_fp8"  # ComfyUI's *_fp8_e4m3fn_scaled files: an empty fp8 tensor
# Beside the scales, what ComfyUI's fp8 layers keep that is no weight: the activations'
# scales (`scale_input`, mixed files' `input_scale`) only serve fp8 x fp8 matrix products
# (comfy/ops.py fp8_linear); computing in the weights' dequantised dtype never reads them.
_NOT_WEIGHTS = (".scale_input", ".input_scale", ".comfy_quant")


def unscaled_fp8(weights: StateDict, dtype: torch.dtype | None = None) -> StateDict:
    """ComfyUI's scaled fp8 files (text encoders such as `umt5_xxl_fp8_e4m3fn_scaled` or
    `qwen_2.5_vl_7b_fp8_scaled`, diffusion models such as `wan2.1_t2v_14B_fp8_scaled` or
    `*_fp8mixed`) as plain weights: each scaled matrix is its fp8 values times its
    `<name>.scale_weight` (mixed files: `<name>.weight_scale`, the same number:
    comfy.utils.convert_old_quants renames one to the other), as ComfyUI's layers dequantise
    it; loaded as they are, the fp8 values alone would be silently wrong by that factor. One
    tensor at a time, each in `dtype` (float32 when None), so the whole model is never held
    in float32. Other tensors are left as they are; weights without scales are returned as
    they came."""
    if not any(_is_marker(key) or key.endswith(FP8_SCALES) for key in weights):
        return weights
    plain: StateDict = {}
    for key, value in weights.items():
        if _is_marker(key) or key.endswith((*FP8_SCALES, *_NOT_WEIGHTS)):
            continue
        layer = key.removesuffix(".weight")
        scale = next((weights[layer + s] for s in FP8_SCALES if layer + s in weights), None)
        if key.endswith(".weight") and scale is not None:
            value = (value.to(torch.float32) * scale.to(torch.float32)).to(dtype or torch.float32)
        plain[key] = value
    return plain


def _is_marker(key: str) -> bool:
    """The `scaled_fp8` marker, alone or under a prefix (as detection reads it:
    transformer_files._fp8)."""
    return key == SCALED_FP8_MARK or key.endswith("." + SCALED_FP8_MARK)
