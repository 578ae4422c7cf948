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
    dtype_name: str  # "float16", "bfloat16" or "float32"
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
# A diagnostic for tests and benchmarks, not a user setting: forces the compute dtype on any
# device, the CPU included (PyTorch runs both half types there, slowly), so that what a GPU
# computes in half precision can be checked on a machine without one.
DTYPE_ENV = "EASEL_DTYPE"
DTYPE_NAMES = ("float16", "bfloat16", "float32")
_DEVICE_NAME = re.compile(r"cpu|mps|cuda(:\d+)?")


def forced_dtype() -> str | None:
    """$EASEL_DTYPE when set, else None; a clear error for any other value."""
    name = os.environ.get(DTYPE_ENV, "").strip()
    if not name:
        return None
    if name not in DTYPE_NAMES:
        raise BadInput(f"{DTYPE_ENV} must be one of {', '.join(DTYPE_NAMES)}, not {name!r}")
    return name


def _dtype_for(device: str) -> str:
    """$EASEL_DTYPE if set; else float16 on accelerators, float32 on the CPU (half precision
    is slow there)."""
    return forced_dtype() or ("float32" if device == "cpu" else "float16")


def device_choice(name: str, *, low_vram: bool = False) -> DeviceChoice:
    """`cpu`, `mps`, `cuda` or `cuda:N`; float16 on accelerators."""
    if not _DEVICE_NAME.fullmatch(name):
        raise BadInput(f"the device must be cpu, mps, cuda or cuda:N (e.g. cuda:1), not {name!r}")
    return DeviceChoice(name, _dtype_for(name), low_vram)


def pick_device(*, low_vram: bool = False) -> DeviceChoice:
    """$EASEL_DEVICE if set, else the fastest device present; float16 on accelerators (half
    precision is slow on CPUs).

    `low_vram` is the user's "low VRAM" setting; the worker should pass it through."""
    if chosen := os.environ.get(DEVICE_ENV):
        return device_choice(chosen, low_vram=low_vram)
    import torch

    if torch.cuda.is_available():
        return DeviceChoice("cuda", _dtype_for("cuda"), low_vram)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return DeviceChoice("mps", _dtype_for("mps"), low_vram)
    return DeviceChoice("cpu", _dtype_for("cpu"), low_vram)


def transformer_dtype(device: DeviceChoice) -> torch.dtype:
    """The dtype to run a flow-matching transformer family (Flux.1, SD 3.x) in on `device`.

    Their released weights are bfloat16 and their activations (T5's above all) overflow in
    float16, so a CUDA GPU that computes in bfloat16 natively gets bfloat16; any other
    device keeps its own choice (a CPU float32, MPS and older GPUs float16). $EASEL_DTYPE,
    when set, is kept as it is: it exists to run exactly that dtype."""
    import torch

    if forced_dtype() or device.dtype_name != "float16" or not device.device.startswith("cuda"):
        return device.torch_dtype
    if not torch.cuda.is_available():
        return device.torch_dtype
    index = int(device.device.partition(":")[2] or torch.cuda.current_device())
    if torch.cuda.get_device_capability(index) >= BF16_CAPABILITY:
        return torch.bfloat16
    return device.torch_dtype
