"""Job statuses, events and the transition table: the only way a status changes.

The table is data (docs/architecture.md, "Statuses and transitions"); `next_status` is the one
function that reads it. Everything that moves a job asks it first.
"""

from __future__ import annotations

from enum import Enum, StrEnum

from app.errors import UserError


class JobStatus(StrEnum):
    PENDING = "PENDING"
    PROCESSING = "PROCESSING"
    CANCELLING = "CANCELLING"
    PAUSING = "PAUSING"
    PAUSED = "PAUSED"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    BLOCKED = "BLOCKED"  # waits for its parent jobs to succeed

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES

    @property
    def is_running(self) -> bool:
        """A worker holds the job (it must heartbeat)."""
        return self in RUNNING_STATUSES

    @property
    def is_stopping(self) -> bool:
        """Its worker was asked to stop (cancel or pause) and has not reached a checkpoint yet."""
        return self in STOPPING_STATUSES


class JobEvent(StrEnum):
    SUBMIT = "SUBMIT"
    START = "START"
    PAUSE = "PAUSE"
    CANCEL = "CANCEL"
    COMPLETE = "COMPLETE"
    FAIL = "FAIL"
    TIMEOUT = "TIMEOUT"
    STOPPED = "STOPPED"
    RESUME = "RESUME"
    RETRY = "RETRY"
    SUBMIT_AFTER = "SUBMIT_AFTER"  # submit a job that names parent jobs
    UNBLOCK = "UNBLOCK"  # every parent succeeded


S, E = JobStatus, JobEvent

# (from status, event) -> to status. `None` stands for "a job that does not exist yet".
TRANSITIONS: dict[tuple[JobStatus | None, JobEvent], JobStatus] = {
    (None, E.SUBMIT): S.PENDING,
    (S.PENDING, E.START): S.PROCESSING,
    (S.PENDING, E.PAUSE): S.PAUSED,
    (S.PENDING, E.CANCEL): S.CANCELLED,
    (S.PROCESSING, E.COMPLETE): S.SUCCESS,
    (S.PROCESSING, E.FAIL): S.FAILED,
    (S.PROCESSING, E.CANCEL): S.CANCELLING,
    (S.PROCESSING, E.PAUSE): S.PAUSING,
    (S.PROCESSING, E.TIMEOUT): S.TIMEOUT,
    (S.CANCELLING, E.STOPPED): S.CANCELLED,
    (S.CANCELLING, E.COMPLETE): S.SUCCESS,  # finished before the cancel took effect
    (S.CANCELLING, E.FAIL): S.FAILED,
    (S.CANCELLING, E.TIMEOUT): S.CANCELLED,  # a cancel wins over recovery
    (S.PAUSING, E.STOPPED): S.PAUSED,
    (S.PAUSING, E.COMPLETE): S.SUCCESS,
    (S.PAUSING, E.FAIL): S.FAILED,
    (S.PAUSING, E.CANCEL): S.CANCELLING,
    (S.PAUSING, E.TIMEOUT): S.PAUSED,  # keeps the last saved checkpoint, if any
    (S.PAUSED, E.RESUME): S.PENDING,
    (S.PAUSED, E.CANCEL): S.CANCELLED,
    (S.FAILED, E.RETRY): S.PENDING,
    (S.FAILED, E.CANCEL): S.CANCELLED,
    (S.TIMEOUT, E.RETRY): S.PENDING,
    (S.TIMEOUT, E.CANCEL): S.CANCELLED,
    (None, E.SUBMIT_AFTER): S.BLOCKED,
    (S.BLOCKED, E.UNBLOCK): S.PENDING,  # every parent is SUCCESS
    (S.BLOCKED, E.CANCEL): S.CANCELLED,  # by the user, or because a parent was cancelled
}

# Requests that are already satisfied: repeating them changes nothing and writes no history.
ALREADY_SATISFIED: frozenset[tuple[JobStatus, JobEvent]] = frozenset(
    {
        (S.CANCELLING, E.CANCEL),
        (S.CANCELLED, E.CANCEL),
        (S.PAUSING, E.PAUSE),
        (S.PAUSED, E.PAUSE),
    }
)

TERMINAL_STATUSES: frozenset[JobStatus] = frozenset({S.SUCCESS, S.CANCELLED})
RUNNING_STATUSES: frozenset[JobStatus] = frozenset({S.PROCESSING, S.CANCELLING, S.PAUSING})
# Running, with a stop asked: the worker ends it at its next step checkpoint (STOPPED).
STOPPING_STATUSES: frozenset[JobStatus] = frozenset({S.CANCELLING, S.PAUSING})


class GroupAction(Enum):
    """What a user does to every member of a group at once (`groups.act_on_group`)."""

    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    RETRY = "retry"


class TransitionNotAllowed(UserError):
    """An event the table does not allow for the job's current status."""

    def __init__(
        self, job_id: int | None, status: JobStatus | None, event: JobEvent, hint: str = ""
    ) -> None:
        self.job_id = job_id
        self.status = status
        self.event = event
        if status is not None:
            where = f"job {job_id} in {status.value}"
        else:
            where = "a new job" if job_id is None else f"job {job_id}"
        super().__init__(f"Can't {event.value} {where}" + (f": {hint}" if hint else ""))


def next_status(job_id: int | None, status: JobStatus | None, event: JobEvent) -> JobStatus:
    """The status that `event` moves a job in `status` to, or `TransitionNotAllowed`."""
    try:
        return TRANSITIONS[(status, event)]
    except KeyError:
        raise TransitionNotAllowed(job_id, status, event) from None


def is_already_satisfied(status: JobStatus, event: JobEvent) -> bool:
    return (status, event) in ALREADY_SATISFIED


def allowed_events(status: JobStatus) -> frozenset[JobEvent]:
    """Events that would move a job in `status` (what the UI may offer)."""
    return frozenset(event for (source, event) in TRANSITIONS if source == status)
