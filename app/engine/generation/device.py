"""Which device and precision to generate on: CUDA, then Apple MPS, then the CPU.

torch is imported inside the functions so that importing this module stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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


def pick_device(*, low_vram: bool = False) -> DeviceChoice:
    """The fastest device present; float16 on accelerators (half precision is slow on CPUs).

    `low_vram` is the user's "low VRAM" setting; the worker should pass it through."""
    import torch

    if torch.cuda.is_available():
        return DeviceChoice("cuda", "float16", low_vram)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return DeviceChoice("mps", "float16", low_vram)
    return DeviceChoice("cpu", "float32", low_vram)
