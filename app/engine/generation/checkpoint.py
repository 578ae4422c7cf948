"""Mid-denoise checkpoints: everything needed to finish a paused generation bit-exactly.

Saved with `torch.save` and loaded with `weights_only=True`, so a checkpoint file can only
hold tensors and plain values, never code; the scheduler is stored as its attribute values
and rebuilt from the model's scheduler config on resume.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from app.engine.generation.errors import CheckpointCorrupt, CheckpointMismatch
from app.engine.generation.files import atomic_write
from app.engine.params import GenerationParams

FORMAT = "easel-denoise-checkpoint"
VERSION = 1


@dataclass
class Checkpoint:
    params: dict[str, Any]
    steps_done: int  # scheduler steps finished (what on_step reported last)
    index: int  # timesteps consumed; differs from steps_done for 2nd-order schedulers
    elapsed_s: float
    latents: torch.Tensor
    prompt_embeds: torch.Tensor
    timestep_cond: torch.Tensor | None
    generator_state: torch.Tensor
    scheduler_class: str
    scheduler_state: dict[str, Any]
    # SDXL only (None for SD 1.x/2.x): pooled text embeddings and size/crop time ids.
    pooled_embeds: torch.Tensor | None = None
    add_time_ids: torch.Tensor | None = None

    def check_matches(self, params: GenerationParams) -> None:
        """Raise `CheckpointMismatch` naming each field that differs from `params`."""
        wanted = params.to_dict()
        differing = sorted(
            k for k in wanted.keys() | self.params.keys() if wanted.get(k) != self.params.get(k)
        )
        if differing:
            details = ", ".join(
                f"{k}: {self.params.get(k)!r} in the checkpoint, {wanted.get(k)!r} requested"
                for k in differing
            )
            raise CheckpointMismatch(f"checkpoint was made with other parameters ({details})")


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Write atomically: a crash mid-save leaves the previous checkpoint (or none), never half."""
    payload = {"format": FORMAT, "version": VERSION, **_to_plain(checkpoint)}
    atomic_write(path, lambda handle: torch.save(payload, handle))


def load_checkpoint(path: Path) -> Checkpoint:
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as error:  # torch raises many types for a damaged file; all mean the same
        raise CheckpointCorrupt(f"checkpoint {path} is unreadable: {error}") from error
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointCorrupt(f"{path} is not an Easel denoising checkpoint")
    if payload.get("version") != VERSION:
        raise CheckpointCorrupt(
            f"checkpoint {path} has version {payload.get('version')!r}; this Easel reads {VERSION}"
        )
    try:
        checkpoint = Checkpoint(
            **{k: v for k, v in payload.items() if k not in ("format", "version")}
        )
    except TypeError as error:
        raise CheckpointCorrupt(f"checkpoint {path} is incomplete: {error}") from error
    _check_types(path, checkpoint)
    return checkpoint


def delete_checkpoint(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _check_types(path: Path, checkpoint: Checkpoint) -> None:
    tensors = ("latents", "prompt_embeds", "generator_state")
    wrong = [name for name in tensors if not isinstance(getattr(checkpoint, name), torch.Tensor)]
    if not isinstance(checkpoint.params, dict) or not isinstance(checkpoint.scheduler_state, dict):
        wrong.append("params or scheduler_state")
    if wrong:
        raise CheckpointCorrupt(f"checkpoint {path} is damaged: bad {', '.join(wrong)}")


def _to_plain(checkpoint: Checkpoint) -> dict[str, Any]:
    fields = dict(vars(checkpoint))
    for key, value in fields.items():
        fields[key] = _cpu(value, key)
    return fields


def _cpu(value: Any, where: str) -> Any:
    """Tensors to the CPU; anything `weights_only` loading would refuse is a bug, caught now."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    if isinstance(value, list | tuple):
        return type(value)(_cpu(item, where) for item in value)
    if isinstance(value, dict):
        return {str(k): _cpu(v, f"{where}.{k}") for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot checkpoint {where}: unsupported type {type(value).__name__}")
