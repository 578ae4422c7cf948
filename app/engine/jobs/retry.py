"""The automatic retry policy: FAILED (transient) and TIMEOUT jobs go back to PENDING.

Each failure is decided exactly once: the job is either retried (RETRY with an exponential
`not_before` backoff) or marked given up with the reason. A job whose worker died on every
attempt is quarantined: it is probably what kills the worker, so it is not tried again.
A user can always retry by hand (that clears `given_up`). Whether a failure is transient is
the job's `error_transient` column, written with the FAIL from the error's own `transient`
field (`app.errors.is_transient`), never read back out of a message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from app.engine.jobs.queue import JobNotFound, JobQueue
from app.engine.jobs.states import JobEvent, JobStatus, TransitionNotAllowed
from app.errors import describe, is_transient
from app.models.tables import JOB, Job, JobTransition

log = logging.getLogger(__name__)

SOURCE = "retry-policy"
CONTINUES_FROM = "continues from saved step"  # the RETRY row's note (timeline_words reads it)


def is_settled(job: Job) -> bool:
    """Nothing more happens to `job` unless a user asks: finished, cancelled or given up."""
    if job.status in (JobStatus.FAILED, JobStatus.TIMEOUT):
        return job.given_up  # otherwise the policy will retry it or give it up
    return JobStatus(job.status).is_terminal


def failure_changes(error: BaseException) -> dict[str, Any]:
    """The columns a FAIL transition sets: what went wrong, and whether a retry may cure it."""
    return {"error": describe(error), "error_transient": is_transient(error)}


def describe_error(error: BaseException) -> str:
    """The failure as recorded with the job and in its timeline."""
    return describe(error)


@dataclass(frozen=True)
class RetryPolicy:
    base_delay_s: float = 2.0
    max_delay_s: float = 300.0

    def delay_s(self, attempt: int) -> float:
        """Backoff before attempt `attempt + 1`: base, 2 x base, 4 x base, ... capped."""
        return min(self.max_delay_s, self.base_delay_s * 2 ** max(0, attempt - 1))


@dataclass
class RetryDecisions:
    requeued: list[int] = field(default_factory=list)
    given_up: list[int] = field(default_factory=list)
    quarantined: list[int] = field(default_factory=list)  # also in given_up


def _nothing_saved(_job: Job) -> int | None:
    return None


def apply_retry_policy(
    queue: JobQueue,
    policy: RetryPolicy,
    *,
    now: float | None = None,
    saved_step: Callable[[Job], int | None] = _nothing_saved,
) -> RetryDecisions:
    """Decide every FAILED or TIMEOUT job that has not been decided yet.

    `saved_step`: the step a job's saved checkpoint reached (the caller knows where they
    are): a requeued job keeps it as its progress, so it shows where it will continue."""
    now = queue.clock() if now is None else now  # not_before is compared by every claim
    decisions = RetryDecisions()
    for job in undecided_jobs(queue):
        try:
            _decide(queue, policy, job, now, decisions, saved_step)
        except (TransitionNotAllowed, JobNotFound):
            log.debug("job %s moved while the retry policy looked at it", job.id)
    return decisions


def undecided_jobs(queue: JobQueue) -> list[Job]:
    # A direct read: only this policy needs "failed and not given up", and it is a short list
    # (every job on it is decided now), unlike all FAILED jobs ever.
    failed = [JobStatus.FAILED.value, JobStatus.TIMEOUT.value]
    query = select(JOB).where(JOB.c.status.in_(failed), JOB.c.given_up.is_(False))
    with queue.db.read() as conn:
        return [Job.model_validate(row._mapping) for row in conn.execute(query.order_by(JOB.c.id))]


def _decide(
    queue: JobQueue,
    policy: RetryPolicy,
    job: Job,
    now: float,
    decisions: RetryDecisions,
    saved_step: Callable[[Job], int | None],
) -> None:
    job_id = job.id or 0
    history = queue.timeline(job_id)
    reason = give_up_reason(job, history)
    if reason is None:
        delay = policy.delay_s(job.attempt)
        message = f"automatic retry {job.attempt + 1} of {job.max_attempts} after {delay:g}s"
        step = saved_step(job)
        if step:
            message += f"; {CONTINUES_FROM} {step}"
        queue.retry(
            job_id, source=SOURCE, message=message, not_before=now + delay,
            progress_step=step or 0,
        )  # fmt: skip
        decisions.requeued.append(job_id)
        return
    if not queue.mark_given_up(job_id, reason, version=job.version):
        return  # moved meanwhile (e.g. the user retried it): nothing to decide any more
    log.info("job %s given up: %s", job_id, reason)
    decisions.given_up.append(job_id)
    if is_quarantined(job, history):
        decisions.quarantined.append(job_id)


def give_up_reason(job: Job, history: Sequence[JobTransition]) -> str | None:
    """Why `job` must not be retried automatically, or None to retry it."""
    last = _last_failure(history)
    what = last.message if last is not None else (job.error or "unknown error")
    if job.status == JobStatus.FAILED and not job.error_transient:
        return f"not retried automatically, the error is not transient ({what})"
    if job.attempt < job.max_attempts:
        return None
    if is_quarantined(job, history):
        return (
            f"quarantined: its worker died or stopped responding on all {job.attempt} "
            f"attempts ({what})"
        )
    return f"gave up after {job.attempt} of {job.max_attempts} attempts ({what})"


def is_quarantined(job: Job, history: Sequence[JobTransition]) -> bool:
    """Every attempt so far ended with its worker lost (TIMEOUT)."""
    timed_out = {t.attempt for t in history if t.event == JobEvent.TIMEOUT.value}
    return job.status == JobStatus.TIMEOUT and timed_out >= set(range(1, job.attempt + 1))


def _last_failure(history: Sequence[JobTransition]) -> JobTransition | None:
    ends = (JobEvent.FAIL.value, JobEvent.TIMEOUT.value)
    return next((t for t in reversed(history) if t.event in ends), None)
