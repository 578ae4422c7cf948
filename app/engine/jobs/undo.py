"""Cancel with undo: a queued job is held PAUSED for a few seconds before it is cancelled.

The window offers Undo for `UNDO_WINDOW_S`. The pending cancel is stored with the job
(`job.cancel_after`, written in the same transaction as the hold's PAUSE), so a window
that dies inside its undo time leaves a job that says it was being cancelled, not one
paused for ever: launch recovery and the maintenance passes finish it once its time has
passed (`complete_pending_cancels`), through the transition table like any other cancel.

The mark belongs to the PAUSED the hold made: any transition out of PAUSED clears it
(`JobQueue.fire`), so a job resumed meanwhile, by anyone, is never cancelled later.

Light at import: the window's timeline reads `HOLD_SOURCE` long before the store's
modules (SQLAlchemy, a second on a busy machine) are loaded on the database thread, so
those are imported where they are used.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import TYPE_CHECKING

from app.engine.jobs.states import JobEvent, JobStatus, TransitionNotAllowed

if TYPE_CHECKING:
    from app.engine.jobs.queue import JobQueue

log = logging.getLogger(__name__)

UNDO_WINDOW_S = 6.0  # how long the window offers Undo
# The stored time is later than the window's: the window's own timer starts only when the
# hold's answer reaches it, and must always be the one that finishes (or undoes) while it
# lives; the stored time matters only once that window is gone (killed, crashed, power cut).
STORED_MARGIN_S = 30.0
UNDO_DEADLINE_S = UNDO_WINDOW_S + STORED_MARGIN_S
# Who fired the hold's PAUSE, as the history stores it: the timeline tells a hold from a
# plain pause by it.
HOLD_SOURCE = "undo-window"
HOLD_MESSAGE = "cancel asked: held a few seconds so it can be undone"
UNDONE_MESSAGE = "cancel undone: queued again"
WINDOW_GONE = "cancelled: the undo window closed while Easel was not running"


class Hold(Enum):
    """How a job was held for an undo, which says what Undo gives back."""

    QUEUED = "queued"  # it was waiting: PAUSED by the hold, queued again by Undo
    PAUSED = "paused"  # it was paused already: only marked, and Undo leaves it paused


def hold_for_undo(queue: JobQueue, job_id: int, *, cancel_after: float) -> Hold | None:
    """Hold a queued or paused job until `cancel_after` (Unix seconds); None if it is
    neither (running, claimed just now, finished): that one is for an ordinary cancel."""
    status = JobStatus(queue.get(job_id).status)
    if status is JobStatus.PENDING:
        try:
            queue.fire(
                job_id, JobEvent.PAUSE, source=HOLD_SOURCE, message=HOLD_MESSAGE,
                changes={"cancel_after": cancel_after}, only_from=[JobStatus.PENDING],
            )  # fmt: skip
        except TransitionNotAllowed:  # a worker claimed it first
            return None
        return Hold.QUEUED
    if status is JobStatus.PAUSED and _mark(queue, job_id, cancel_after):
        return Hold.PAUSED
    return None


def undo(queue: JobQueue, job_id: int, *, requeue: bool) -> bool:
    """Take the pending cancel back; `requeue`: the job was queued, so queue it again.
    False if the cancel was no longer pending (finished, or the job moved meanwhile)."""
    if not _unmark(queue, job_id):
        return False
    if requeue:
        try:  # named by HOLD_SOURCE: the timeline says the cancel was undone, not "Resumed"
            queue.resume(job_id, source=HOLD_SOURCE, message=UNDONE_MESSAGE)
        except TransitionNotAllowed:  # moved between the two: it is not cancelled either way
            return False
    return True


def finish(queue: JobQueue, job_id: int, *, source: str = "user", message: str = "") -> bool:
    """Cancel a held job whose cancel is still pending; False if it is not (undone,
    resumed, or cancelled by someone else first)."""
    if not _is_pending(queue, job_id):
        return False
    try:
        queue.fire(job_id, JobEvent.CANCEL, source=source, message=message,
                   only_from=[JobStatus.PAUSED])  # fmt: skip
    except TransitionNotAllowed:  # resumed between the read and the cancel
        return False
    return True


def complete_pending_cancels(
    queue: JobQueue, now: float, *, source: str, message: str = WINDOW_GONE
) -> list[int]:
    """Cancel every held job whose undo time passed before `now`: the window that held it
    is gone. Returns the ids cancelled (each with a history row saying why)."""
    from sqlalchemy import select

    from app.models.tables import JOB

    due = (
        select(JOB.c.id)
        .where(JOB.c.status == JobStatus.PAUSED.value, JOB.c.cancel_after <= now)
        .order_by(JOB.c.id)
    )
    with queue.db.read() as conn:
        job_ids = [int(job_id) for job_id in conn.execute(due).scalars()]
    cancelled = [i for i in job_ids if finish(queue, i, source=source, message=message)]
    if cancelled:
        log.info("cancelled held jobs %s: their undo time passed", cancelled)
    return cancelled


def _is_pending(queue: JobQueue, job_id: int) -> bool:
    """Is the job held with its cancel still pending (PAUSED and marked)?"""
    from sqlalchemy import select

    from app.models.tables import JOB

    query = select(JOB.c.id).where(
        JOB.c.id == job_id,
        JOB.c.status == JobStatus.PAUSED.value,
        JOB.c.cancel_after.is_not(None),
    )
    with queue.db.read() as conn:
        return conn.execute(query).first() is not None


def _mark(queue: JobQueue, job_id: int, cancel_after: float) -> bool:
    """Mark a paused job as held; not a transition (it stays PAUSED), so no history row."""
    from sqlalchemy import update

    from app.models.tables import JOB

    query = update(JOB).where(JOB.c.id == job_id, JOB.c.status == JobStatus.PAUSED.value)
    with queue.db.write() as conn:
        return conn.execute(query.values(cancel_after=cancel_after)).rowcount == 1


def _unmark(queue: JobQueue, job_id: int) -> bool:
    """Clear a pending cancel; False if there was none. Once cleared, no pass cancels it."""
    from sqlalchemy import update

    from app.models.tables import JOB

    query = update(JOB).where(
        JOB.c.id == job_id,
        JOB.c.status == JobStatus.PAUSED.value,
        JOB.c.cancel_after.is_not(None),
    )
    with queue.db.write() as conn:
        return conn.execute(query.values(cancel_after=None)).rowcount == 1
