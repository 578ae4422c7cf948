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
# How many workers share this process's device: a supervisor starts all its workers on one
# device and sets this in each (`WorkerConfig.device_workers`), so each plans for its share.
DEVICE_WORKERS_ENV = "EASEL_DEVICE_WORKERS"
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
    """From the machine: most of this worker's share of the accelerator's memory (see
    `_device_memory`), half of the RAM."""
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


def device_workers() -> int:
    """$EASEL_DEVICE_WORKERS: the workers sharing this device (1 when unset or not a count)."""
    value = os.environ.get(DEVICE_WORKERS_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 1


def device_memory_free(device: str) -> int | None:
    """Graphics memory this process could use now: free on the device plus what torch's
    allocator holds for this process already (its loaded models, its cached blocks).
    None off CUDA (MPS shares the RAM)."""
    import torch

    if not (device.startswith("cuda") and torch.cuda.is_available()):
        return None
    index = _cuda_index(device)
    free, _total = torch.cuda.mem_get_info(index)
    return int(free + torch.cuda.memory_reserved(index))


def largest_part_bytes(pipe: Any) -> int:
    """The weights of a pipeline's largest part: what model CPU offload (low-VRAM mode),
    which puts one part at a time on the GPU, needs there at least."""
    import torch

    parts = [c for c in pipe.components.values() if isinstance(c, torch.nn.Module)]
    return max((module_bytes([part]) for part in parts), default=0)


def _device_memory(device: str) -> int | None:
    """What this worker may plan for on a CUDA device: its even share of the card among the
    workers that share it, and never more than is free now plus what this process holds
    (memory another program or worker took is not ours to plan for)."""
    import torch

    available = device_memory_free(device)
    if available is None:
        return None
    _free, total = torch.cuda.mem_get_info(_cuda_index(device))
    return min(int(total) // device_workers(), available)


def _cuda_index(device: str) -> int:
    import torch

    return int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
