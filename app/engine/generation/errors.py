"""Errors of the generation side, in Easel's one hierarchy (`app.errors`).

No torch import: the app classifies worker errors too (`is_transient`, from `app.errors`),
so torch's out-of-memory error is recognised by its name, not its class.
"""

from __future__ import annotations

from app.errors import EaselError, MissingModel, UserError, is_transient

__all__ = [
    "CheckpointCorrupt",
    "CheckpointError",
    "CheckpointMismatch",
    "GenerationError",
    "ModelLoadFailed",
    "NonFiniteLatents",
    "NonFiniteVaeOutput",
    "NotEnoughGraphicsMemory",
    "UnsupportedModel",
    "is_out_of_memory",
    "is_transient",
]

# torch.OutOfMemoryError (torch.cuda.OutOfMemoryError is the same class), CUDA and MPS.
_OOM_TYPE = "OutOfMemoryError"
_OOM_MARKER = "out of memory"  # "CUDA error: out of memory", "MPS backend out of memory"


def is_out_of_memory(error: BaseException) -> bool:
    """True when the accelerator ran out of memory: what low-VRAM mode may cure.

    Narrower than `is_transient`: a database away, a full disk or host RAM running out
    are transient too, but offloading the model to the CPU cures none of them.
    """
    if isinstance(error, EaselError):
        return False
    if any(cls.__name__ == _OOM_TYPE for cls in type(error).__mro__):
        return True
    return isinstance(error, RuntimeError) and _OOM_MARKER in str(error).lower()


class GenerationError(EaselError):
    """Base of the errors this package raises on purpose (environment, not bugs)."""


class UnsupportedModel(GenerationError, MissingModel):
    """The folder is a diffusers pipeline, but not one the Stable Diffusion runner can drive."""


class ModelLoadFailed(UnsupportedModel):
    """A model that looked usable did not load (a damaged file, a fine-tune of another
    layout): one sentence naming the file and what is wrong, never the loader's own text
    (often a page of Python advice), which goes to the worker's log instead."""


class CheckpointError(GenerationError):
    """A pause checkpoint that cannot be used; the caller decides (discard, or fail the job)."""


class CheckpointMismatch(CheckpointError):
    """The checkpoint belongs to other generation parameters (or another model layout)."""


class CheckpointCorrupt(CheckpointError):
    """The checkpoint file is unreadable, truncated or not an Easel checkpoint."""


class NonFiniteLatents(GenerationError):
    """The model produced NaN or infinite values: decoding them would give a garbage image."""


class NonFiniteVaeOutput(NonFiniteLatents):
    """The VAE produced them (it overflowed in half precision): the runner retries the job
    once with that VAE in float32 (`vae_precision.keep_in_float32`)."""


GB = 1e9  # graphics memory is sold and shown in decimal gigabytes


class NotEnoughGraphicsMemory(GenerationError, UserError):
    """Out of GPU memory even with low-VRAM mode: no retry cures it on this GPU. Not
    transient: another attempt on the same card fails the same way."""

    @classmethod
    def for_model(cls, name: str, needed: int | None, free: int | None) -> NotEnoughGraphicsMemory:
        """One sentence naming the model, what its largest part needs and what the GPU has
        (each left out when unknown)."""
        has = f"; this GPU has {free / GB:.1f} GB free" if free is not None else ""
        if needed is None:
            return cls(f"{name} does not fit in graphics memory even with low-VRAM mode{has}")
        return cls(
            f"{name} needs about {needed / GB:.1f} GB of graphics memory even with low-VRAM "
            f"mode{has}"
        )


class ClipDoesNotFit(GenerationError, UserError):
    """A clip whose estimated needs (`video_budget.clip_memory`) exceed the memory left
    beside its model even with a tiled decode: said before its first step, not after an
    hour. Not transient: another attempt on the same machine fails the same way."""

    @classmethod
    def for_clip(cls, needed: int, free: int, where: str) -> ClipDoesNotFit:
        return cls(
            f"this clip needs about {needed / GB:.1f} GB of memory beside its model and "
            f"{where} has {free / GB:.1f} GB free; ask for fewer frames or a smaller size"
        )
