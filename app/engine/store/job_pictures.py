"""A stored job's picture as the image of a new job (outpaint's canvas, a control layer's or
a reference's image, a mask): the command line and the HTTP API refuse the same jobs in the
same sentences (a job that makes no picture, has none yet, or whose file is gone)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.engine.jobs.mask import InvalidMask
from app.engine.outputs.registry import output_of_job
from app.engine.store.stored_files import output_bytes
from app.models.tables import Job

if TYPE_CHECKING:
    from app.engine.jobs.queue import JobQueue


def picture_job(queue: JobQueue, job_id: int) -> Job:
    """Job `job_id`, refused unless its kind of output is a picture (one to paint on)."""
    job = queue.get(job_id)  # JobNotFound first: "There is no job 12"
    kind = output_of_job(job.kind)
    if not kind.is_picture:
        raise InvalidMask(f"job {job_id} makes a {kind.name}, not a picture to paint on")
    return job


def finished_picture(
    queue: JobQueue, job_id: int, outputs_dir: Path | None, *, to: str = "use"
) -> tuple[Job, bytes]:
    """Job `job_id` and its finished picture's bytes (`to`: what for, in the refusal). On a
    shared queue a file here is read only inside `outputs_dir` (else the database's copy)."""
    stored = picture_job(queue, job_id)
    if not stored.output_path:
        raise InvalidMask(f"job {job_id} has no finished image to {to} yet")
    try:
        image_png = output_bytes(queue.db, stored, outputs_dir)
    except OSError as error:
        raise InvalidMask(
            f"cannot read job {job_id}'s image {stored.output_path}: {error.strerror or error}"
        ) from error
    if image_png is None:
        raise InvalidMask(f"job {job_id}'s image is neither on this machine nor in the queue")
    return stored, image_png
