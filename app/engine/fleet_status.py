"""The fleet as the job table sees it, for the Workers panel (no Qt; one read).

A worker leaves its id (`host:pid:token`) on every job it claims and heartbeats while it
holds one, so the job rows say which workers exist, what each runs now, when it was last
heard of and how many images it finished. A worker that never claimed a job does not
show; the device a worker uses is not stored (the app hears it in the READY message of
its own workers only).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import func, select

from app.engine.liveness import WorkerIdentity
from app.engine.queue import JobQueue
from app.engine.states import JobStatus
from app.models.tables import JOB

_RUNNING = [status.value for status in JobStatus if status.is_running]


@dataclass(frozen=True)
class WorkerSummary:
    worker_id: str
    machine: str  # the host (or --name) part of the id; the whole id if it has no parts
    current_job: int | None  # the job it holds now (PROCESSING, CANCELLING or PAUSING)
    last_heard_s: float | None  # seconds since its last heartbeat or finished job
    jobs_done: int  # jobs whose image it wrote (SUCCESS, last attempt by this worker)


def list_workers(queue: JobQueue, *, now: float | None = None) -> list[WorkerSummary]:
    """Every worker the job table knows, the busy ones first, then the most recently heard."""
    now = time.time() if now is None else now
    running = select(JOB.c.worker_id, JOB.c.id, JOB.c.heartbeat_at).where(
        JOB.c.status.in_(_RUNNING), JOB.c.worker_id.is_not(None)
    )
    done = (
        select(JOB.c.worker_id, func.count(), func.max(JOB.c.finished_at))
        .where(JOB.c.status == JobStatus.SUCCESS.value, JOB.c.worker_id.is_not(None))
        .group_by(JOB.c.worker_id)
    )
    with queue.db.read() as conn:
        holding = {worker: (job_id, beat) for worker, job_id, beat in conn.execute(running)}
        finished = {worker: (int(n), last) for worker, n, last in conn.execute(done)}
    summaries = []
    for worker in holding.keys() | finished.keys():
        job_id, beat = holding.get(worker, (None, None))
        count, last_done = finished.get(worker, (0, None))
        heard = max((t for t in (beat, last_done) if t is not None), default=None)
        identity = WorkerIdentity.parse(worker)
        summaries.append(
            WorkerSummary(
                worker_id=worker,
                machine=identity.host if identity is not None else worker,
                current_job=job_id,
                last_heard_s=max(0.0, now - heard) if heard is not None else None,
                jobs_done=count,
            )
        )
    return sorted(summaries, key=_busy_then_recent)


def _busy_then_recent(summary: WorkerSummary) -> tuple[bool, float, str]:
    heard = summary.last_heard_s if summary.last_heard_s is not None else float("inf")
    return summary.current_job is None, heard, summary.worker_id
