"""Favourites: a starred job is never pruned, and its output says so in its own file when
its kind records stars there (`OutputKind.record_star`; an image: a PNG text chunk)."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import update

from app.engine.jobs.queue import JobNotFound, JobQueue
from app.engine.outputs.registry import UnknownOutputKind, output_of_job
from app.engine.paths import recorded_file
from app.engine.settings import load_settings
from app.models.tables import JOB

log = logging.getLogger(__name__)


def star(queue: JobQueue, job_id: int, *, on: bool = True) -> Path | None:
    """Star (or unstar) a job; returns its output file if the star was recorded in it too.

    Starring is not a status change: it never moves the job nor writes a history row.
    The file is updated after the commit, and a missing or unreadable file only logs."""
    with queue.db.write() as conn:
        if conn.execute(update(JOB).where(JOB.c.id == job_id).values(starred=on)).rowcount == 0:
            raise JobNotFound(job_id)
    job = queue.get(job_id)
    try:
        record = output_of_job(job.kind).record_star
    except UnknownOutputKind:
        return None  # a newer Easel's kind: the row holds the star
    output = _own_output(queue, job.output_path)
    if output is None or record is None:
        return None
    try:
        record(output, on)
    except (OSError, ValueError) as error:  # ValueError: not the kind's file (NotAPng)
        log.warning("job %s: the star is stored, but not in its file %s: %s", job_id, output, error)
        return None
    return output


def _own_output(queue: JobQueue, recorded: str | None) -> Path | None:
    """The job's output file to write the star into; on a shared store only one inside this
    machine's outputs folder (a row there may be a peer's, naming any file)."""
    shared = queue.db.shares_files
    folders = [load_settings().outputs_path()] if shared else []
    return recorded_file(recorded, shared=shared, folders=folders)
