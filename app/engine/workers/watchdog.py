"""The watchdog: a running job whose heartbeat is older than the timeout has lost its worker.

It fires TIMEOUT through the table (PROCESSING -> TIMEOUT, CANCELLING -> CANCELLED,
PAUSING -> PAUSED), conditionally: only if the job is still in the status it was seen in
and still held by the same worker, so a job that moved on meanwhile is never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from app.engine.jobs.queue import JobNotFound, JobQueue, NotHoldingJob, TransitionRecord
from app.engine.jobs.states import JobEvent, JobStatus, TransitionNotAllowed
from app.models.tables import Job

log = logging.getLogger(__name__)

SOURCE = "watchdog"


@dataclass(frozen=True)
class TimedOut:
    job: Job  # as it was seen, before the TIMEOUT
    record: TransitionRecord


def stale_jobs(jobs: Iterable[Job], timeout_s: float, now: float) -> list[Job]:
    return [job for job in jobs if now - (job.heartbeat_at or 0.0) > timeout_s]


def time_out_stale_jobs(
    queue: JobQueue, timeout_s: float, *, now: float, source: str = SOURCE
) -> list[TimedOut]:
    """TIMEOUT every running job with a stale heartbeat; returns what it did."""
    done = []
    for job in stale_jobs(queue.running_jobs(), timeout_s, now):
        age = now - (job.heartbeat_at or 0.0)
        message = f"no heartbeat from {job.worker_id} for {age:.1f}s (timeout {timeout_s:g}s)"
        record = settle_lost_job(queue, job, source=source, message=message)
        if record is not None:
            done.append(TimedOut(job, record))
    return done


def settle_lost_job(
    queue: JobQueue, job: Job, *, source: str, message: str
) -> TransitionRecord | None:
    """Fire TIMEOUT for `job`, whose worker is gone; None if the job moved on meanwhile."""
    try:
        return queue.fire(
            job.id or 0,
            JobEvent.TIMEOUT,
            source=source,
            message=message,
            worker_id=job.worker_id,
            only_from={JobStatus(job.status)},
        )
    except (TransitionNotAllowed, NotHoldingJob, JobNotFound) as moved:
        log.debug("job %s moved on before its TIMEOUT: %s", job.id, moved)
        return None
