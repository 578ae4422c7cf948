"""The watchdog: a running job whose heartbeat is older than the timeout has lost its worker.

It fires TIMEOUT through the table (PROCESSING -> TIMEOUT, CANCELLING -> CANCELLED,
PAUSING -> PAUSED), conditionally: only if the job is still in the status it was seen in
and still held by the same worker, so a job that moved on meanwhile is never touched.

Times are the store's (`JobQueue.clock`), so machines whose clocks disagree agree on a
heartbeat's age. A heartbeat nobody could write is not judged: while this process found
the store unreachable, no worker could beat either, so after an outage ages count from
when the store came back (`reachable_since`), and a worker that kept its job through the
outage has a full timeout to beat again.
"""

from __future__ import annotations

import logging
import time
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


def silent_s(job: Job, now: float, reachable_since: float = -float("inf")) -> float:
    """How long the job's worker has been silent while it could have beaten."""
    return now - max(job.heartbeat_at or 0.0, reachable_since)


def stale_jobs(
    jobs: Iterable[Job], timeout_s: float, now: float, reachable_since: float = -float("inf")
) -> list[Job]:
    return [job for job in jobs if silent_s(job, now, reachable_since) > timeout_s]


def reachable_since(queue: JobQueue, now: float) -> float:
    """When (in the store's time) this process last found the store back after an outage;
    -inf if it never lost it."""
    ended_at = queue.db.outage.ended_at
    if ended_at is None:
        return -float("inf")
    return now - max(0.0, time.monotonic() - ended_at)


def time_out_stale_jobs(
    queue: JobQueue, timeout_s: float, *, now: float, source: str = SOURCE
) -> list[TimedOut]:
    """TIMEOUT every running job with a stale heartbeat; returns what it did."""
    done = []
    running = queue.running_jobs()
    # After the read: when it is the first to reach the store after an outage, the outage
    # has only now ended, and the heartbeats it read are as old as the outage.
    since = reachable_since(queue, now)
    for job in stale_jobs(running, timeout_s, now, since):
        age = silent_s(job, now, since)
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
