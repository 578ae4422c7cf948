"""The job queue: the one writer of job status.

Every status change goes through `JobQueue.fire`, which asks the transition table
and then does one transaction: a conditional update of the job row (on status and
version) plus one history row. Zero rows updated means somebody else moved the
job first: re-read and decide again, never overwrite.

Hot paths (fire, claim, heartbeat) use SQLAlchemy Core: the ORM costs several
times the per-transaction price of SQLite itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Row, func, insert, or_, select, update

from app.engine import paths
from app.engine.params import GenerationParams
from app.engine.states import (
    JobEvent,
    JobStatus,
    TransitionNotAllowed,
    is_already_satisfied,
    next_status,
)
from app.models.db import Database, open_database
from app.models.tables import JOB, TRANSITION, Job, JobTransition

log = logging.getLogger(__name__)

MAX_DECIDE_AGAIN = 20
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_PAGE_SIZE = 200

Clock = Callable[[], float]


class JobNotFound(LookupError):
    def __init__(self, job_id: int) -> None:
        super().__init__(f"There is no job {job_id}")
        self.job_id = job_id


class RequestRefused(Exception):
    """A request that makes no sense for this job (e.g. re-running one still queued)."""


class NotHoldingJob(Exception):
    """A worker reported on a job that is no longer its own (timed out and re-claimed)."""

    def __init__(self, job_id: int, worker_id: str, holder: str | None) -> None:
        super().__init__(f"Job {job_id} is held by {holder or 'no worker'}, not by {worker_id}")


@dataclass(frozen=True)
class TransitionRecord:
    """What `fire` did; `changed` is False for an already-satisfied request."""

    job_id: int
    from_status: JobStatus | None
    to_status: JobStatus
    event: JobEvent
    source: str
    message: str
    attempt: int
    at: float
    changed: bool = True


TransitionListener = Callable[[TransitionRecord], None]


@dataclass
class _Snapshot:
    status: JobStatus
    version: int
    attempt: int
    worker_id: str | None


@dataclass
class JobQueue:
    db: Database
    clock: Clock = time.time
    listeners: list[TransitionListener] = field(default_factory=list)

    # --- submitting --------------------------------------------------------------------------

    def submit(
        self,
        params: GenerationParams,
        *,
        priority: int = 0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        source: str = "user",
        rerun_of: int | None = None,
    ) -> int:
        """Validate, store as PENDING with its SUBMIT history row, and return the new id."""
        params = params.validated().with_concrete_seed()
        if max_attempts < 1:
            raise RequestRefused(f"max_attempts must be at least 1, not {max_attempts}")
        status = next_status(None, None, JobEvent.SUBMIT)
        now = self.clock()
        values = {
            **params.to_dict(),
            "status": status.value,
            "version": 0,
            "attempt": 1,
            "max_attempts": max_attempts,
            "given_up": False,
            "priority": priority,
            "progress_step": 0,
            "progress_total": params.steps,
            "created_at": now,
            "updated_at": now,
            "rerun_of": rerun_of,
        }
        message = f"re-run of job {rerun_of}" if rerun_of else ""
        with self.db.write() as conn:
            job_id = int(conn.execute(insert(JOB).values(values).returning(JOB.c.id)).scalar_one())
            record = TransitionRecord(
                job_id, None, status, JobEvent.SUBMIT, source, message, 1, now
            )
            _insert_history(conn, record)
        self._notify(record)
        return job_id

    # --- the one writer of status ------------------------------------------------------------

    def fire(
        self,
        job_id: int,
        event: JobEvent,
        *,
        source: str,
        message: str = "",
        worker_id: str | None = None,
        changes: Mapping[str, Any] | None = None,
        only_from: Iterable[JobStatus] | None = None,
    ) -> TransitionRecord:
        """Move a job by `event` through the table, in one transaction with its history row.

        `worker_id`: the event comes from this worker, which must still hold the job.
        `changes`: extra columns set in the same update (output path, error, ...).
        `only_from`: refuse unless the job is in one of these statuses (e.g. the watchdog
        must not time out a job that moved on while it looked).
        Raises `TransitionNotAllowed`, `JobNotFound` or `NotHoldingJob`.
        """
        allowed_from = frozenset(only_from) if only_from is not None else None
        for _ in range(MAX_DECIDE_AGAIN):
            with self.db.write() as conn:
                snap = _snapshot(conn, job_id)
                if worker_id is not None and snap.worker_id != worker_id:
                    raise NotHoldingJob(job_id, worker_id, snap.worker_id)
                if allowed_from is not None and snap.status not in allowed_from:
                    raise TransitionNotAllowed(job_id, snap.status, event)
                if is_already_satisfied(snap.status, event):
                    return TransitionRecord(
                        job_id, snap.status, snap.status, event, source, message,
                        snap.attempt, self.clock(), changed=False,
                    )  # fmt: skip
                target = next_status(job_id, snap.status, event)
                record = self._apply(conn, job_id, snap, event, target, source, message, changes)
            if record is not None:
                self._notify(record)
                return record
            log.debug("job %s moved while %s was decided; deciding again", job_id, event)
        raise RuntimeError(f"job {job_id} kept changing; gave up deciding {event.value}")

    def _apply(
        self,
        conn: Connection,
        job_id: int,
        snap: _Snapshot,
        event: JobEvent,
        target: JobStatus,
        source: str,
        message: str,
        changes: Mapping[str, Any] | None,
    ) -> TransitionRecord | None:
        now = self.clock()
        attempt = snap.attempt + 1 if event is JobEvent.RETRY else snap.attempt
        values = {
            **_event_effects(event, target, now),
            **(changes or {}),
            "status": target.value,
            "version": snap.version + 1,
            "attempt": attempt,
            "updated_at": now,
        }
        result = conn.execute(
            update(JOB)
            .where(
                JOB.c.id == job_id,
                JOB.c.status == snap.status.value,
                JOB.c.version == snap.version,
            )
            .values(values)
        )
        if result.rowcount == 0:
            return None
        record = TransitionRecord(job_id, snap.status, target, event, source, message, attempt, now)
        _insert_history(conn, record)
        return record

    def _notify(self, record: TransitionRecord) -> None:
        # Side effects run after the commit; a failing listener never blocks a transition.
        for listener in list(self.listeners):
            try:
                listener(record)
            except Exception:
                log.exception("transition listener %r failed for %s", listener, record)

    # --- claiming ----------------------------------------------------------------------------

    def claim(self, worker_id: str, *, source: str = "worker") -> Job | None:
        """START the next PENDING job for `worker_id`, atomically; None when nothing is due.

        One UPDATE picks and takes the row, so two workers can never hold one job.
        """
        now = self.clock()
        pending = JobStatus.PENDING.value
        due = (
            select(JOB.c.id)
            .where(
                JOB.c.status == pending, or_(JOB.c.not_before.is_(None), JOB.c.not_before <= now)
            )
            .order_by(JOB.c.priority.desc(), JOB.c.id)
            .limit(1)
            .scalar_subquery()
        )
        target = next_status(None, JobStatus.PENDING, JobEvent.START)
        claim = (
            update(JOB)
            .where(JOB.c.id == due, JOB.c.status == pending)
            .values(
                status=target.value,
                version=JOB.c.version + 1,
                worker_id=worker_id,
                heartbeat_at=now,
                started_at=now,
                updated_at=now,
                not_before=None,
                progress_step=0,
            )
            .returning(*JOB.c)
        )
        with self.db.write() as conn:
            row = conn.execute(claim).first()
            if row is None:
                return None
            record = TransitionRecord(
                row.id, JobStatus.PENDING, target, JobEvent.START, source,
                f"claimed by {worker_id}", row.attempt, now,
            )  # fmt: skip
            _insert_history(conn, record)
        self._notify(record)
        return _job(row)

    # --- liveness and progress (not transitions) ---------------------------------------------

    def heartbeat(self, job_id: int, worker_id: str) -> bool:
        """Refresh the heartbeat; False when the worker no longer holds a running job."""
        return self._touch(job_id, worker_id, heartbeat_at=self.clock())

    def report_progress(self, job_id: int, worker_id: str, step: int, total: int) -> bool:
        now = self.clock()
        return self._touch(
            job_id, worker_id, heartbeat_at=now, progress_step=step, progress_total=total
        )

    def _touch(self, job_id: int, worker_id: str, **values: Any) -> bool:
        running = [s.value for s in JobStatus if s.is_running]
        with self.db.write() as conn:
            result = conn.execute(
                update(JOB)
                .where(JOB.c.id == job_id, JOB.c.worker_id == worker_id, JOB.c.status.in_(running))
                .values(values)
            )
            return result.rowcount == 1

    # --- what the user asks for --------------------------------------------------------------

    def cancel(self, job_id: int, *, source: str = "user", message: str = "") -> TransitionRecord:
        return self.fire(job_id, JobEvent.CANCEL, source=source, message=message)

    def pause(self, job_id: int, *, source: str = "user", message: str = "") -> TransitionRecord:
        return self.fire(job_id, JobEvent.PAUSE, source=source, message=message)

    def resume(self, job_id: int, *, source: str = "user", message: str = "") -> TransitionRecord:
        return self.fire(job_id, JobEvent.RESUME, source=source, message=message)

    def retry(
        self,
        job_id: int,
        *,
        source: str = "user",
        message: str = "",
        not_before: float | None = None,
    ) -> TransitionRecord:
        changes = {"not_before": not_before, "given_up": False}
        return self.fire(job_id, JobEvent.RETRY, source=source, message=message, changes=changes)

    def rerun(self, job_id: int, *, source: str = "user") -> int:
        """A new job with the same parameters (and seed), pointing back to `job_id`."""
        job = self.get(job_id)
        if not JobStatus(job.status).is_terminal:
            raise RequestRefused(
                f"Job {job_id} is {job.status}; only finished or cancelled jobs can be re-run"
            )
        return self.submit(
            params_of(job), priority=job.priority, max_attempts=job.max_attempts,
            source=source, rerun_of=job_id,
        )  # fmt: skip

    def set_priority(self, job_id: int, priority: int) -> None:
        with self.db.write() as conn:
            result = conn.execute(update(JOB).where(JOB.c.id == job_id).values(priority=priority))
            if result.rowcount == 0:
                raise JobNotFound(job_id)

    def mark_given_up(self, job_id: int, reason: str) -> None:
        """Record that automatic retries stopped (the status stays FAILED or TIMEOUT)."""
        with self.db.write() as conn:
            conn.execute(update(JOB).where(JOB.c.id == job_id).values(given_up=True, error=reason))

    # --- reading -----------------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        with self.db.read() as conn:
            row = conn.execute(select(JOB).where(JOB.c.id == job_id)).first()
        if row is None:
            raise JobNotFound(job_id)
        return _job(row)

    def jobs(
        self,
        statuses: Iterable[JobStatus] | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        before_id: int | None = None,
    ) -> list[Job]:
        """A page of jobs, newest first; page on with `before_id` = the last id seen."""
        query = select(JOB).order_by(JOB.c.id.desc()).limit(limit)
        if statuses is not None:
            query = query.where(JOB.c.status.in_([s.value for s in statuses]))
        if before_id is not None:
            query = query.where(JOB.c.id < before_id)
        with self.db.read() as conn:
            return [_job(row) for row in conn.execute(query)]

    def count_by_status(self) -> dict[JobStatus, int]:
        query = select(JOB.c.status, func.count()).group_by(JOB.c.status)
        with self.db.read() as conn:
            return {JobStatus(status): int(n) for status, n in conn.execute(query)}

    def timeline(self, job_id: int) -> list[JobTransition]:
        query = select(TRANSITION).where(TRANSITION.c.job_id == job_id).order_by(TRANSITION.c.id)
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        if not rows:
            self.get(job_id)  # raises JobNotFound for an unknown id
        return [JobTransition.model_validate(row._mapping) for row in rows]

    def running_jobs(self) -> list[Job]:
        running = [s.value for s in JobStatus if s.is_running]
        with self.db.read() as conn:
            return [_job(row) for row in conn.execute(select(JOB).where(JOB.c.status.in_(running)))]


def params_of(job: Job) -> GenerationParams:
    return GenerationParams(
        prompt=job.prompt, negative_prompt=job.negative_prompt, model=job.model,
        scheduler=job.scheduler, steps=job.steps, cfg=job.cfg, width=job.width,
        height=job.height, seed=job.seed,
    )  # fmt: skip


def _event_effects(event: JobEvent, target: JobStatus, now: float) -> dict[str, Any]:
    """Columns an event sets besides the status itself."""
    if target.is_terminal or target in (JobStatus.FAILED, JobStatus.TIMEOUT):
        return {"finished_at": now}
    if event is JobEvent.START:
        return {"heartbeat_at": now, "started_at": now}
    if event is JobEvent.RETRY:
        # A resumed job keeps its progress (it continues from its checkpoint); a retry starts over.
        return {"finished_at": None, "progress_step": 0}
    return {}


def _snapshot(conn: Connection, job_id: int) -> _Snapshot:
    row = conn.execute(
        select(JOB.c.status, JOB.c.version, JOB.c.attempt, JOB.c.worker_id).where(
            JOB.c.id == job_id
        )
    ).first()
    if row is None:
        raise JobNotFound(job_id)
    return _Snapshot(JobStatus(row.status), row.version, row.attempt, row.worker_id)


def _insert_history(conn: Connection, record: TransitionRecord) -> None:
    conn.execute(
        insert(TRANSITION).values(
            job_id=record.job_id,
            attempt=record.attempt,
            from_status=record.from_status.value if record.from_status else None,
            to_status=record.to_status.value,
            event=record.event.value,
            source=record.source,
            message=record.message,
            at=record.at,
        )
    )


def _job(row: Row[Any]) -> Job:
    return Job.model_validate(row._mapping)


def open_queue(db_path: Path | None = None) -> JobQueue:
    """The queue on the user's database (or `db_path`), with the standard side effects."""
    queue = JobQueue(open_database(db_path or paths.database_path()))
    queue.listeners.append(_checkpoint_cleaner(queue))
    return queue


def _checkpoint_cleaner(queue: JobQueue) -> TransitionListener:
    """Remove a job's pause checkpoint once the job can never resume from it."""

    def clean(record: TransitionRecord) -> None:
        if not (record.changed and record.to_status.is_terminal):
            return
        checkpoint = queue.get(record.job_id).checkpoint_path
        if checkpoint:
            Path(checkpoint).unlink(missing_ok=True)

    return clean
