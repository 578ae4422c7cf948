"""Mid-denoise checkpoints: everything needed to finish a paused generation bit-exactly.

A checkpoint file is a small container that vouches for itself:

    EASEL-CHECKPOINT\n
    {"version": 3, "sha256": ..., "payload_bytes": ..., "params": {...}, ...}\n
    <payload: torch.save of the state>

The JSON header line carries the SHA-256 and length of the payload and the generation
parameters the state belongs to, so damage (a flipped block, a truncated copy) and a
mismatch are both found before torch reads a byte of the payload. The payload is loaded
with `weights_only=True`, so it can only hold tensors and plain values, never code.

Version 3 names everything itself: the model family and its conditioning tensors (see
`families`), and the scheduler's state as `schedulers.scheduler_state` spells it; the
scheduler is rebuilt from the model's config on resume. A cached job's file adds its step
cache's state (`step_cache`); files without it read as uncached. Version 2 (before model families)
kept SD/SDXL tensors as fields and the scheduler as its attribute values (`vars`, private
ones included); such files are still read, converted on loading (`_from_version_2`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import torch

from app.durable import atomic_write
from app.engine.generation.errors import CheckpointCorrupt, CheckpointMismatch
from app.engine.generation.loop.checkpoint_files import MAGIC
from app.engine.jobs.params import GenerationParams

VERSION = 3
READABLE_VERSIONS = (2, VERSION)
_HEADER_LIMIT = 1 << 20  # a header line longer than this is damage, not parameters


@dataclass
class Checkpoint:
    params: dict[str, Any]
    steps_done: int  # scheduler steps finished (what on_step reported last)
    index: int  # timesteps consumed; differs from steps_done for 2nd-order schedulers
    elapsed_s: float
    latents: torch.Tensor
    generator_state: torch.Tensor
    family: str  # the `ModelFamily.name` it was made by; it resumes only on that family
    conditioning: dict[str, torch.Tensor]  # the family's, by name (`checkpoint_tensors`)
    scheduler_class: str
    scheduler_state: dict[str, Any]  # by our names (`schedulers.scheduler_state`)
    # A cached job's step cache between steps (`step_cache.saved`); {} uncached, and in
    # files written before step caching.
    step_cache: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SavedCheckpoint:
    """A checkpoint as loaded from its file, with when it was written (wall clock)."""

    checkpoint: Checkpoint
    saved_at: float


def check_params(saved: dict[str, Any], params: GenerationParams) -> None:
    wanted = params.to_dict()
    # A checkpoint written before a field existed was made with that field's default.
    defaults = GenerationParams(prompt="").to_dict()
    differing = sorted(
        k for k in wanted.keys() | saved.keys() if wanted.get(k) != saved.get(k, defaults.get(k))
    )
    if differing:
        details = ", ".join(
            f"{k}: {saved.get(k)!r} in the checkpoint, {wanted.get(k)!r} requested"
            for k in differing
        )
        raise CheckpointMismatch(f"checkpoint was made with other parameters ({details})")


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    """The file's bytes: header line (checksum, parameters) and payload."""
    head, payload = _encoded_parts(checkpoint)
    return head + payload


def _encoded_parts(checkpoint: Checkpoint) -> tuple[bytes, memoryview]:
    """The file's first line and its payload, the payload as torch wrote it (no copy: a
    clip's is tens of MB, and copying it holds the GIL the denoising loop needs; hashing
    it does not)."""
    buffer = io.BytesIO()
    torch.save(_to_plain(checkpoint), buffer)
    payload = buffer.getbuffer()
    header = {
        "version": VERSION,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "payload_bytes": len(payload),
        "params": checkpoint.params,
        "steps_done": checkpoint.steps_done,
        "saved_at": time.time(),
    }
    return MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n", payload


def write_checkpoint_bytes(path: Path, data: bytes) -> None:
    """Write atomically: a crash mid-save leaves the previous checkpoint (or none), never half."""
    atomic_write(path, lambda handle: handle.write(data))


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Written atomically and flushed (`atomic_write`): its header line, then its payload,
    each straight from where it was made."""
    head, payload = _encoded_parts(checkpoint)

    def write(handle: IO[bytes]) -> None:
        handle.write(head)
        handle.write(payload)

    atomic_write(path, write)


def load_checkpoint(path: Path, params: GenerationParams | None = None) -> SavedCheckpoint:
    """Read and verify `path`; with `params`, also that it was made for them.

    Raises `FileNotFoundError`, `CheckpointCorrupt` (damaged, truncated, not ours) or
    `CheckpointMismatch` (made for other parameters).
    """
    header, payload = _verified_parts(path, path.read_bytes())
    if params is not None:
        check_params(header["params"], params)
    try:
        state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception as error:  # the checksum held, so this is a bug or a forged file
        raise CheckpointCorrupt(f"checkpoint {path} is unreadable: {error}") from error
    if not isinstance(state, dict):
        raise CheckpointCorrupt(f"checkpoint {path} is damaged: its payload is not a mapping")
    if header["version"] == 2:
        state = _from_version_2(state)
    try:
        checkpoint = Checkpoint(**state)
    except TypeError as error:
        raise CheckpointCorrupt(f"checkpoint {path} is incomplete: {error}") from error
    _check_types(path, checkpoint)
    if checkpoint.params != header["params"]:
        raise CheckpointCorrupt(f"checkpoint {path} is damaged: its header and payload disagree")
    return SavedCheckpoint(checkpoint, float(header.get("saved_at", 0.0)))


def _verified_parts(path: Path, data: bytes) -> tuple[dict[str, Any], bytes]:
    if not data.startswith(MAGIC):
        raise CheckpointCorrupt(f"{path} is not an Easel denoising checkpoint")
    end = data.find(b"\n", len(MAGIC), len(MAGIC) + _HEADER_LIMIT)
    try:
        header = json.loads(data[len(MAGIC) : end]) if end > 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or not isinstance(header.get("params"), dict):
        raise CheckpointCorrupt(f"checkpoint {path} is damaged: unreadable header")
    if header.get("version") not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        raise CheckpointCorrupt(
            f"checkpoint {path} has version {header.get('version')!r}; this Easel reads {readable}"
        )
    payload = data[end + 1 :]
    if len(payload) != header.get("payload_bytes"):
        raise CheckpointCorrupt(
            f"checkpoint {path} is truncated: {len(payload)} of {header.get('payload_bytes')} bytes"
        )
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise CheckpointCorrupt(f"checkpoint {path} is damaged: its checksum does not match")
    return header, payload


def delete_checkpoint(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def detached_copy(checkpoint: Checkpoint) -> Checkpoint:
    """A copy sharing no tensor, list or dict with the running loop (for a background save).

    Cheap next to a step (a few small tensors), so it is taken on the loop's thread; the
    slow part (serialising, hashing, writing, fsync) then runs elsewhere.
    """
    return Checkpoint(**{k: _cpu(v, k, copy=True) for k, v in vars(checkpoint).items()})


_VERSION_2_TENSORS = ("prompt_embeds", "timestep_cond", "pooled_embeds", "add_time_ids")


def _from_version_2(state: dict[str, Any]) -> dict[str, Any]:
    """A version 2 payload as version 3: the same resume, from a file made before families.

    Its tensors keep their names (the SD and SDXL families use the same ones); a file
    with pooled embeddings was made by SDXL. Its scheduler state was `vars(scheduler)`:
    the step index is diffusers' private `_step_index` there, the multistep history is
    in public attributes.
    Anything missing is found when the scheduler state is loaded (`CheckpointMismatch`).
    """
    upgraded = {k: v for k, v in state.items() if k not in _VERSION_2_TENSORS}
    conditioning = {k: state[k] for k in _VERSION_2_TENSORS if state.get(k) is not None}
    upgraded["conditioning"] = conditioning
    upgraded["family"] = "sdxl" if "pooled_embeds" in conditioning else "sd"
    old_scheduler = state.get("scheduler_state")
    if isinstance(old_scheduler, dict):
        explicit = {k: v for k, v in old_scheduler.items() if not k.startswith("_")}
        if "_step_index" in old_scheduler:  # absent, it stays missing: never guessed as None
            explicit["step_index"] = old_scheduler["_step_index"]
        upgraded["scheduler_state"] = explicit
    return upgraded


def _check_types(path: Path, checkpoint: Checkpoint) -> None:
    tensors = ("latents", "generator_state")
    wrong = [name for name in tensors if not isinstance(getattr(checkpoint, name), torch.Tensor)]
    if not isinstance(checkpoint.params, dict) or not isinstance(checkpoint.scheduler_state, dict):
        wrong.append("params or scheduler_state")
    if not isinstance(checkpoint.family, str):
        wrong.append("family")
    if not isinstance(checkpoint.step_cache, dict):
        wrong.append("step_cache")
    conditioning = checkpoint.conditioning
    if not isinstance(conditioning, dict) or not all(
        isinstance(v, torch.Tensor) for v in conditioning.values()
    ):
        wrong.append("conditioning")
    if wrong:
        raise CheckpointCorrupt(f"checkpoint {path} is damaged: bad {', '.join(wrong)}")


def _to_plain(checkpoint: Checkpoint) -> dict[str, Any]:
    fields = dict(vars(checkpoint))
    for key, value in fields.items():
        fields[key] = _cpu(value, key)
    return fields


def _cpu(value: Any, where: str, *, copy: bool = False) -> Any:
    """Tensors to the CPU; anything `weights_only` loading would refuse is a bug, caught now."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=copy)
    if isinstance(value, list | tuple):
        return type(value)(_cpu(item, where, copy=copy) for item in value)
    if isinstance(value, dict):
        return {str(k): _cpu(v, f"{where}.{k}", copy=copy) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot checkpoint {where}: unsupported type {type(value).__name__}")
