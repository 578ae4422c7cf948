"""Every output kind Easel makes, and the one question asked of it: which kind is this?

A job's kind (`GenerationParams.kind`, stored in the job row) decides its output's kind, so
a reader that holds the job (the server, the gallery, an export) asks `output_of_job`. A new
kind is a module declaring an `OutputKind`, registered here.
"""

from __future__ import annotations

from app.engine.outputs.image import IMAGE
from app.engine.outputs.kinds import FileKind, OutputKind
from app.engine.outputs.video import VIDEO
from app.errors import BadInput

OUTPUT_KINDS: dict[str, OutputKind] = {}


class UnknownOutputKind(BadInput):
    """A job kind no registered output kind makes (a newer Easel's job, or a typo)."""


def register(kind: OutputKind) -> OutputKind:
    """Add `kind`; refused if its name, suffix, stored kind or a job kind is taken."""
    if kind.file_kind == FileKind.CHECKPOINT:
        raise ValueError(f"output kind {kind.name!r} is stored as the checkpoints are")
    for other in OUTPUT_KINDS.values():
        clash = _clash(kind, other)
        if clash:
            raise ValueError(f"output kind {kind.name!r} has the {clash} of {other.name!r}")
    OUTPUT_KINDS[kind.name] = kind
    return kind


def _clash(kind: OutputKind, other: OutputKind) -> str:
    if kind.name == other.name:
        return "name"
    if kind.suffix == other.suffix:
        return f"suffix {kind.suffix}"
    if kind.file_kind == other.file_kind:
        return f"stored kind {kind.file_kind.value!r}"
    shared = set(kind.job_kinds) & set(other.job_kinds)
    return f"job kind {sorted(shared)[0]!r}" if shared else ""


def output_of_job(job_kind: str) -> OutputKind:
    """The kind of output a job of `job_kind` leaves."""
    for kind in OUTPUT_KINDS.values():
        if job_kind in kind.job_kinds:
            return kind
    raise UnknownOutputKind(f"no output kind is made by jobs of kind {job_kind!r}")


def all_output_kinds() -> tuple[OutputKind, ...]:
    return tuple(OUTPUT_KINDS.values())


register(IMAGE)
register(VIDEO)
