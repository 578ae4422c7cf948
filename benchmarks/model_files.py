"""Full-size random-weight checkpoints, as artists download them: one `.safetensors` file
in the original (LDM / A1111) layout, built from the configs Easel ships
(resources/model_configs), so the networks are exactly the released SD 1.5 and SDXL ones.

Written one component at a time, tensor by tensor (the header first, from the shapes alone):
the whole model is never in memory twice, and SDXL in float16 needs about 5 GB at the peak.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from app.engine.generation.load.pipelines import bundled_configs
from app.testing.tiny.original_layout import (
    _prefixed,
    _with_text_model_prefix,
    open_clip_to_original,
    unet_to_original,
    vae_to_original,
)

DTYPES = {torch.float16: "F16", torch.float32: "F32", torch.bfloat16: "BF16"}


def components(name: str) -> list[str]:
    return ["unet", "vae", "text_encoder"] + (["text_encoder_2"] if name == "sdxl" else [])


def _build(name: str, component: str) -> torch.nn.Module:
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    folder = bundled_configs().root / name / component
    if component == "unet":
        return UNet2DConditionModel.from_config(UNet2DConditionModel.load_config(folder))
    if component == "vae":
        return AutoencoderKL.from_config(AutoencoderKL.load_config(folder))
    config = CLIPTextConfig.from_pretrained(folder)
    if component == "text_encoder_2":
        return CLIPTextModelWithProjection(config)
    return CLIPTextModel(config)


def _original(name: str, component: str, module: Any) -> dict[str, torch.Tensor]:
    state = module.state_dict()
    if component == "unet":
        return unet_to_original(state, module.config)
    if component == "vae":
        return vae_to_original(state, len(module.config.block_out_channels))
    encoder = _with_text_model_prefix(state)
    if component == "text_encoder_2":
        return open_clip_to_original(encoder, "conditioner.embedders.1.model.")
    prefix = (
        "conditioner.embedders.0.transformer."
        if name == "sdxl"
        else "cond_stage_model.transformer."
    )
    return _prefixed(encoder, prefix)


def _meta_layout(name: str) -> list[tuple[str, torch.Size]]:
    from accelerate import init_empty_weights

    layout = []
    for component in components(name):
        with init_empty_weights(include_buffers=True):
            module = _build(name, component)
        layout += [(k, v.shape) for k, v in _original(name, component, module).items()]
    return layout


def _random_components(
    name: str, dtype: torch.dtype, seed: int
) -> Iterator[dict[str, torch.Tensor]]:
    from accelerate import init_empty_weights

    generator = torch.Generator().manual_seed(seed)
    for component in components(name):
        with init_empty_weights():
            module = _build(name, component)
        module = module.to(dtype).to_empty(device="cpu")  # allocated once, in `dtype`
        with torch.no_grad():
            for tensor in module.parameters():
                # Small values: random layers stay finite at any depth.
                tensor.uniform_(-0.02, 0.02, generator=generator)
        state = {k: v.detach().contiguous() for k, v in _original(name, component, module).items()}
        del module
        yield state


def write_random_checkpoint(
    path: Path, name: str, *, dtype: torch.dtype = torch.float16, seed: int = 0
) -> int:
    """A `name` ("sd1", "sdxl") checkpoint of random weights at `path`; its size in bytes."""
    layout = _meta_layout(name)
    size = torch.tensor([], dtype=dtype).element_size()
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for key, shape in layout:
        length = size * int(torch.Size(shape).numel())
        header[key] = {
            "dtype": DTYPES[dtype], "shape": list(shape), "data_offsets": [offset, offset + length],
        }  # fmt: skip
        offset += length
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned
    order = iter(key for key, _ in layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(raw)))
        out.write(raw)
        for state in _random_components(name, dtype, seed):
            for key, tensor in state.items():
                assert key == next(order), key  # the header's order
                raw_bytes: Any = tensor.reshape(-1).view(torch.uint8).numpy()
                out.write(memoryview(raw_bytes))
            del state
    return path.stat().st_size
