"""Which device and precision to generate on: CUDA, then Apple MPS, then the CPU.

torch is imported inside the functions so that importing this module stays cheap.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from app.engine.generation.files.architecture import Architecture
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
# computes in half precision can be checked on a machine without one. One exception, as
# on a GPU: a transformer family's text encoders that overflow float16 never run in it
# (`precision`), so float16 on the CPU runs as a GPU before Ampere does.
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
    """The dtype to run a flow-matching transformer family (Flux.1, SD 3.x, Z-Image,
    Flux.2 Klein) in on `device`: `family_precision(device).transformer`."""
    import torch

    return getattr(torch, family_precision(device).transformer)


@dataclass(frozen=True)
class Precision:
    """What a flow-matching transformer family computes in: the transformer (with the VAE
    and the CLIP encoders, which are safe in float16), and the text encoders that float16
    overflows (see `precision`)."""

    transformer: str
    text_encoder: str


DEFAULT_COMPONENT = "default"  # diffusers' key, in a per-component dtype, for the rest


def component_dtypes(architecture: Architecture, chosen: Precision) -> dict[str, str]:
    """Each component's dtype name as diffusers' `from_pretrained(dtype={...})` takes it:
    `DEFAULT_COMPONENT` (the transformer, VAE and CLIPs) and the text encoders float16
    overflows, as `architecture`'s declaration names them (T5 v1.1 XXL of Flux.1 and SD
    3.x, Qwen3 of Z-Image and Flux.2 Klein; their CLIPs are safe in it)."""
    dtypes = {DEFAULT_COMPONENT: chosen.transformer}
    for component in architecture.spec.float16_overflowing_encoders:
        dtypes[component] = chosen.text_encoder
    return dtypes


def family_precision(device: DeviceChoice) -> Precision:
    """`precision` for `device`, from what torch reports of it."""
    return precision(
        device.device, device.dtype_name, forced=forced_dtype(), bf16_native=bf16_native(device)
    )


def precision(kind: str, chosen: str, *, forced: str | None, bf16_native: bool) -> Precision:
    """The dtypes of a transformer family on a device of `kind` ("cuda", "cuda:N", "mps",
    "cpu") whose own choice is `chosen`; pure, so each case is testable without the device.

    - The transformer: bfloat16 on a CUDA GPU that computes it natively (Ampere and later;
      the families' weights are released in bfloat16), else the device's choice: float16
      on older GPUs and MPS, as stock diffusers users run Flux there (diffusers clips Flux's
      float16 activations for that; float32 would double the memory, and a 12B transformer
      does not fit a 16 GB card even in float16 without offloading), float32 on a CPU.
    - The text encoders that overflow float16 (T5 v1.1 XXL: its feed-forward activations
      exceed 65504, giving inf, then NaN latents; the Qwen3 LLMs were trained in bfloat16)
      run in the transformer's dtype unless that is float16: then in bfloat16 where the
      device computes it natively (MPS on recent macOS, probed), else float32, as diffusers'
      Flux docs advise for float16 GPUs. They run once per job, so the wider dtype costs
      memory (T5 XXL: 19 GB in float32, offloaded on a small card), not time; their output
      is cast to the transformer's dtype (`FlowFamily.for_transformer`).
    - $EASEL_DTYPE (`forced`) sets the transformer's dtype exactly, never promoted; the
      text-encoder rule still applies to it, so a forced float16 on the CPU (no native
      bfloat16 counted there) runs as a Turing GPU does: transformer float16, T5 float32.
    """
    if forced:
        transformer = forced
    elif chosen == "float16" and kind.startswith("cuda") and bf16_native:
        transformer = "bfloat16"
    else:
        transformer = chosen
    if transformer != "float16":
        return Precision(transformer, transformer)
    return Precision(transformer, "bfloat16" if bf16_native else "float32")


def bf16_native(device: DeviceChoice) -> bool:
    """Whether `device` computes bfloat16 natively: a CUDA GPU of capability 8.0 or later;
    MPS where a tiny bfloat16 product runs (macOS 14 and a recent torch); never the CPU
    (slow there: the CPU is a stand-in for float16 GPUs, see `precision`)."""
    import torch

    if device.device.startswith("cuda"):
        if not torch.cuda.is_available():
            return False
        index = int(device.device.partition(":")[2] or torch.cuda.current_device())
        return tuple(torch.cuda.get_device_capability(index)) >= BF16_CAPABILITY
    return device.device == "mps" and _mps_computes_bfloat16()


@cache
def _mps_computes_bfloat16() -> bool:
    """Conservative: a product and a sum in bfloat16 on MPS, checked against their exact
    value; any error (older macOS or torch refuse the dtype) or a wrong value means no."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        return False
    try:
        ones = torch.ones(4, 4, dtype=torch.bfloat16, device="mps")
        value = float((ones @ ones).sum().float().cpu())
    except (RuntimeError, TypeError):
        return False
    return value == 64.0
