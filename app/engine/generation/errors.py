"""Errors of the generation side, and which of them are worth an automatic retry.

No torch import: the app classifies worker errors too, from their type name and message.
"""

from __future__ import annotations


class GenerationError(Exception):
    """Base of the errors this package raises on purpose (environment, not bugs)."""


class UnsupportedModel(GenerationError):
    """The folder is a diffusers pipeline, but not one the Stable Diffusion runner can drive."""


class CheckpointError(GenerationError):
    """A pause checkpoint that cannot be used; the caller decides (discard, or fail the job)."""


class CheckpointMismatch(CheckpointError):
    """The checkpoint belongs to other generation parameters (or another model layout)."""


class CheckpointCorrupt(CheckpointError):
    """The checkpoint file is unreadable, truncated or not an Easel checkpoint."""


class NonFiniteLatents(GenerationError):
    """The model produced NaN or infinite values: decoding them would give a garbage image."""


_OOM_TYPES = frozenset({"OutOfMemoryError", "MemoryError"})
_OOM_MARKERS = ("out of memory", "can't allocate memory")  # CUDA/MPS; CPU allocator


def is_transient(error: BaseException) -> bool:
    """True for errors a retry may cure: running out of (GPU or host) memory."""
    if type(error).__name__ in _OOM_TYPES:
        return True
    message = str(error).lower()
    return any(marker in message for marker in _OOM_MARKERS)
