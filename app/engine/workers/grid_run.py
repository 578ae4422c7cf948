"""A grid's composing job inside a worker: its cells' images (or why there is none) into
one labelled PNG that records the axes. No model and no torch: PIL only.

The cells are the newest job of each cell of the group (a cell re-run after a cancel
takes its original's place); a cell without an image is a placeholder saying why.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    StepDecision,
    StepProgress,
)
from app.engine.generation.post.grid import Cell, compose
from app.engine.jobs.grid_spec import GridSpec
from app.engine.jobs.groups import group_info, newest_members
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.outputs.image import write_png
from app.engine.store.stored_files import output_bytes, output_kind_of
from app.errors import EaselError
from app.models.tables import Job

GRID_CHUNK = "easel-grid"  # the PNG text chunk with the axes and the cells' job ids
# zlib's fastest level for the grid's PNG: a quarter of level 6's time (a 4x4 grid of 64 px
# cells: 10 ms, not 34; of 512 px cells, about a second less) for a file about 1/6 larger.
# The grid is a sheet to look at and pick from; its cells keep their own images.
GRID_COMPRESS_LEVEL = 1


class NotAGrid(EaselError):
    """A composing job whose group has no grid spec (a bug, or a hand-made row)."""


def compose_grid(
    queue: JobQueue,
    job: Job,
    params: GenerationParams,
    output_path: Path,
    on_step: Callable[[StepProgress], StepDecision],
) -> GenerationOutcome:
    started = time.monotonic()
    if job.group_id is None:
        raise NotAGrid(f"job {job.id} composes a grid but belongs to no group")
    info = group_info(queue, job.group_id)
    if not info.spec.get("axes"):
        raise NotAGrid(f"group {job.group_id} of job {job.id} has no grid axes")
    spec = GridSpec.from_dict(info.spec)
    newest = {m.group_cell: m for m in newest_members(info) if m.group_cell is not None}
    members = [newest.get(cell) for cell in range(spec.cells)]
    cells = [_cell(queue, member) for member in members]
    image = compose(spec, cells)
    decision = on_step(StepProgress(1, 1, time.monotonic() - started))
    if decision is StepDecision.CANCEL:
        return GenerationOutcome(OutcomeKind.CANCELLED)
    if decision is StepDecision.PAUSE:
        return GenerationOutcome(OutcomeKind.PAUSED)  # nothing to keep: it composes again
    record = {**spec.to_dict(), "cells": [m.id if m else None for m in members]}
    write_png(
        image, output_path, params, extra_parameters=spec.parameters_text(),
        chunks={GRID_CHUNK: json.dumps(record)}, compress_level=GRID_COMPRESS_LEVEL,
    )  # fmt: skip
    return GenerationOutcome(OutcomeKind.COMPLETED, image_path=output_path)


def _cell(queue: JobQueue, member: Job | None) -> Cell:
    if member is None:
        return Cell(None, "no job")
    status = JobStatus(member.status)
    if status is JobStatus.SUCCESS and not output_kind_of(member).is_picture:
        return Cell(None, f"#{member.id}: its {output_kind_of(member).name} is not a picture")
    if status is JobStatus.SUCCESS:
        picture = output_bytes(queue.db, member)
        return Cell(picture, "" if picture else f"#{member.id}: its image is gone")
    why = status.value.lower()
    if member.error:
        why += f": {member.error}"
    return Cell(None, f"#{member.id} {why}")
