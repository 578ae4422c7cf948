"""Errors of the generation side, in Easel's one hierarchy (`app.errors`).

No torch import: the app classifies worker errors too (`is_transient`, from `app.errors`).
"""

from __future__ import annotations

from app.errors import EaselError, MissingModel, is_transient

__all__ = [
    "CheckpointCorrupt",
    "CheckpointError",
    "CheckpointMismatch",
    "GenerationError",
    "UnsupportedModel",
    "is_transient",
]


class GenerationError(EaselError):
    """Base of the errors this package raises on purpose (environment, not bugs)."""


class UnsupportedModel(GenerationError, MissingModel):
    """The folder is a diffusers pipeline, but not one the Stable Diffusion runner can drive."""


class CheckpointError(GenerationError):
    """A pause checkpoint that cannot be used; the caller decides (discard, or fail the job)."""


class CheckpointMismatch(CheckpointError):
    """The checkpoint belongs to other generation parameters (or another model layout)."""


class CheckpointCorrupt(CheckpointError):
    """The checkpoint file is unreadable, truncated or not an Easel checkpoint."""


class NonFiniteLatents(GenerationError):
    """The model produced NaN or infinite values: decoding them would give a garbage image."""
