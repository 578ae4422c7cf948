"""Which attention kernel a loaded model runs, chosen automatically per worker.

Everywhere: PyTorch's scaled dot-product attention (SDPA, diffusers' default processors
and its "native" backend), which itself picks a flash or memory-efficient kernel where the
device has one. Better: on an NVIDIA GPU with FlashAttention installed, diffusers'
`set_attention_backend` sends the transformer's attention to it ("_flash_3" on Hopper with
FlashAttention 3, "flash" from Ampere on with FlashAttention 2), in half precision only
(its kernels take no float32). Only for the families that declare their attention takes
no mask (`FamilySpec.attention_backends`): diffusers' flash backends refuse one, and a
refusal in the middle of a job would fail it. SageAttention is not chosen: it quantises
queries and keys (a quality cost the user did not ask for).

The choice is the device's and the installed packages', the same on every run of a worker,
so a paused job resumes on it exactly; the timeline says when it is not plain SDPA.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

import torch

from app.engine.generation.files.registry import families
from app.engine.generation.load.compiled import denoiser_of

log = logging.getLogger(__name__)

NATIVE = "native"  # diffusers' name for PyTorch SDPA
LABELS = {NATIVE: "PyTorch SDPA", "flash": "FlashAttention 2", "_flash_3": "FlashAttention 3"}
_HALF = (torch.float16, torch.bfloat16)


def best_backend(device: torch.device, dtype: torch.dtype) -> str:
    """The fastest exact kernel this device and the installed packages offer."""
    if device.type != "cuda" or dtype not in _HALF or not torch.cuda.is_available():
        return NATIVE
    major, _minor = torch.cuda.get_device_capability(device)
    if major == 9 and _installed("flash_attn_interface"):
        return "_flash_3"
    if major >= 8 and _installed("flash_attn"):
        return "flash"
    return NATIVE


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def use_best(pipe: Any, family_name: str) -> str:
    """Put `pipe`'s transformer on the best backend (once per loaded model); the timeline's
    words when that is not plain SDPA ("attention: FlashAttention 2"), else ""."""
    denoiser: Any = denoiser_of(pipe)  # a diffusers model: `set_attention_backend`, dtype
    if denoiser is None or getattr(denoiser, "_easel_attention", None) is not None:
        return ""
    backend = NATIVE
    if family_name in _families_taking_backends() and hasattr(denoiser, "set_attention_backend"):
        backend = best_backend(denoiser.device, denoiser.dtype)
    if backend != NATIVE:
        try:
            denoiser.set_attention_backend(backend)
        except (ImportError, RuntimeError, ValueError) as error:  # its requirements unmet
            log.warning("attention backend %s refused, staying on SDPA: %s", backend, error)
            backend = NATIVE
    denoiser._easel_attention = backend
    return "" if backend == NATIVE else f"attention: {LABELS[backend]}"


def attention_of(pipe: Any) -> str:
    """The backend `pipe`'s transformer runs ("native" until `use_best` chose)."""
    denoiser = denoiser_of(pipe)
    return getattr(denoiser, "_easel_attention", None) or NATIVE


def _families_taking_backends() -> set[str]:
    return {spec.checkpoint_family for spec in families() if spec.attention_backends}
