"""How much memory loaded models may take, and what a model takes.

Two places hold a loaded pipeline: the device it runs on (VRAM) and, on a machine with an
accelerator, system RAM as a standby from which a switch back is a copy instead of a load.
On a CPU the device is RAM, and there is one place only. torch is imported inside the
functions: importing this module stays cheap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 2**30
# Of the device's memory, what generation itself needs beside the weights (activations,
# the VAE decode, the CUDA context): kept free.
DEVICE_HEADROOM_BYTES = 2 * GIB
DEVICE_SHARE = 0.9  # of the rest, loaded models may take this much
RAM_SHARE = 0.5  # of the machine's RAM, models (on a CPU, or standing by) may take this much
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".ckpt", ".pt", ".pth")


@dataclass(frozen=True)
class MemoryBudget:
    """Bytes of loaded models allowed on the device and, standing by, in system RAM
    (`standby_bytes` is 0 where the device is the CPU: RAM is the device then)."""

    device_bytes: int
    standby_bytes: int = 0

    @classmethod
    def total(cls, budget_bytes: int, device: str) -> MemoryBudget:
        """A budget the user set (the settings' memory_budget_gb), for this device: on an
        accelerator it is the RAM standby's; the device keeps its own measured share."""
        if device == "cpu":
            return cls(budget_bytes)
        return cls(default_budget(device).device_bytes, budget_bytes)


def default_budget(device: str) -> MemoryBudget:
    """From the machine: most of the accelerator's memory, half of the RAM."""
    ram = int(RAM_SHARE * _total_ram())
    if device == "cpu":
        return MemoryBudget(ram)
    vram = _device_memory(device)
    if vram is None:  # MPS shares the RAM: no separate standby
        return MemoryBudget(ram)
    return MemoryBudget(max(0, int(DEVICE_SHARE * (vram - DEVICE_HEADROOM_BYTES))), ram)


def pipeline_bytes(pipe: Any) -> int:
    """What a loaded pipeline's weights take (parameters and buffers of its modules)."""
    import torch

    total = 0
    for component in pipe.components.values():
        if isinstance(component, torch.nn.Module):
            for tensor in (*component.parameters(), *component.buffers()):
                total += tensor.numel() * tensor.element_size()
    return total


def module_bytes(modules: Any) -> int:
    """What these modules' weights take (each counted once, however often it is given)."""
    total, seen = 0, set()
    for module in modules:
        if id(module) in seen:
            continue
        seen.add(id(module))
        for tensor in (*module.parameters(), *module.buffers()):
            total += tensor.numel() * tensor.element_size()
    return total


def offload_device(pipe: Any) -> Any | None:
    """Where a pipeline in low-VRAM mode (`enable_model_cpu_offload`: accelerate hooks on
    its components) runs its modules; None when it is not offloaded."""
    from accelerate.hooks import CpuOffload

    for component in pipe.components.values():
        if isinstance(getattr(component, "_hf_hook", None), CpuOffload):
            return pipe._execution_device
    return None


def weight_files(path: Path) -> list[Path]:
    """A single checkpoint file, or every weight file under a pipeline folder."""
    if path.is_file():
        return [path]
    return sorted(
        Path(root) / name
        for root, _dirs, files in os.walk(path)
        for name in files
        if name.endswith(WEIGHT_SUFFIXES)
    )


def weight_file_bytes(path: Path) -> int:
    """The weights on disk (what a load will take, before it is made, to free room first)."""
    return sum(file.stat().st_size for file in weight_files(path))


def available_memory() -> int:
    """System RAM not in use now (page cache that can be given back counts as available)."""
    import psutil

    return int(psutil.virtual_memory().available)


def _total_ram() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def _device_memory(device: str) -> int | None:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
        return int(torch.cuda.get_device_properties(index).total_memory)
    return None
