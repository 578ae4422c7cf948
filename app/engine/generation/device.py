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

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.dtype_name)


CPU = DeviceChoice("cpu", "float32")


def pick_device() -> DeviceChoice:
    """The fastest device present; float16 on accelerators (half precision is slow on CPUs)."""
    import torch

    if torch.cuda.is_available():
        return DeviceChoice("cuda", "float16")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return DeviceChoice("mps", "float16")
    return CPU
