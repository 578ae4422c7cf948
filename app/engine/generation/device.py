"""Which device and precision to generate on: CUDA, then Apple MPS, then the CPU.

torch is imported inside the functions so that importing this module stays cheap.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.errors import BadInput

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DeviceChoice:
    device: str  # "cuda", "mps" or "cpu"
    dtype_name: str  # "float16" or "float32"
    # Keep only the running component on the GPU (model CPU offload) and decode big images
    # in tiles: slower, but SDXL fits in a few GB of VRAM.
    low_vram: bool = False

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.dtype_name)


CPU = DeviceChoice("cpu", "float32")
BF16_CAPABILITY = (8, 0)  # Ampere and later compute in bfloat16 natively
DEVICE_ENV = "EASEL_DEVICE"  # `worker --device cuda:1` sets it: one worker per GPU
_DEVICE_NAME = re.compile(r"cpu|mps|cuda(:\d+)?")


def device_choice(name: str, *, low_vram: bool = False) -> DeviceChoice:
    """`cpu`, `mps`, `cuda` or `cuda:N`; float16 on accelerators."""
    if not _DEVICE_NAME.fullmatch(name):
        raise BadInput(f"the device must be cpu, mps, cuda or cuda:N (e.g. cuda:1), not {name!r}")
    return DeviceChoice(name, "float32" if name == "cpu" else "float16", low_vram)


def pick_device(*, low_vram: bool = False) -> DeviceChoice:
    """$EASEL_DEVICE if set, else the fastest device present; float16 on accelerators (half
    precision is slow on CPUs).

    `low_vram` is the user's "low VRAM" setting; the worker should pass it through."""
    if chosen := os.environ.get(DEVICE_ENV):
        return device_choice(chosen, low_vram=low_vram)
    import torch

    if torch.cuda.is_available():
        return DeviceChoice("cuda", "float16", low_vram)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return DeviceChoice("mps", "float16", low_vram)
    return DeviceChoice("cpu", "float32", low_vram)


def transformer_dtype(device: DeviceChoice) -> torch.dtype:
    """The dtype to run a flow-matching transformer family (Flux.1, SD 3.x) in on `device`.

    Their released weights are bfloat16 and their activations (T5's above all) overflow in
    float16, so a CUDA GPU that computes in bfloat16 natively gets bfloat16; any other
    device keeps its own choice (a CPU float32, MPS and older GPUs float16)."""
    import torch

    if device.dtype_name != "float16" or not device.device.startswith("cuda"):
        return device.torch_dtype
    if not torch.cuda.is_available():
        return device.torch_dtype
    index = int(device.device.partition(":")[2] or torch.cuda.current_device())
    if torch.cuda.get_device_capability(index) >= BF16_CAPABILITY:
        return torch.bfloat16
    return device.torch_dtype
