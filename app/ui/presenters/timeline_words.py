"""A job's history in an artist's words; the exact technical row stays one hover away.

`plain_words` turns one transition into a short sentence ("Picked up by a worker on this
computer", "Paused by you"); `technical` is the row as stored (statuses, event, source,
message), shown as the tooltip.
"""

from __future__ import annotations

from app.engine.liveness import WorkerIdentity, this_host
from app.engine.states import JobEvent, JobStatus
from app.ui.presenters.queue_service import HELD_FOR_UNDO
from app.ui.presenters.rows import TransitionRow

E, S = JobEvent, JobStatus

# Who sent an event, as the sentence names them ("... by you", "... automatically").
BY = {
    "user": "by you",
    "cli": "from the command line",
    "shutdown": "because Easel was closing",
    "supervisor": "by Easel",
    "retry-policy": "automatically",
    "watchdog": "by the watchdog",
    "recovery": "when Easel started",
}


def plain_words(row: TransitionRow, host: str | None = None) -> str:
    """One sentence for the timeline. `host`: this computer's name (default: looked up)."""
    by = BY.get(row.source, f"by {row.source}")
    event, to = row.event, row.to_status
    if event is E.START:
        return " ".join(filter(None, ["Picked up by a worker", _where(row.message, host)]))
    if event is E.PAUSE and row.message == HELD_FOR_UNDO:
        return "Cancelled by you; held a few seconds in case you undo"
    if event in (E.PAUSE, E.CANCEL) and to in (S.PAUSING, S.CANCELLING):
        verb = "Pause" if event is E.PAUSE else "Cancel"
        return f"{verb} asked {by}; the worker stops after its current step"
    if event is E.STOPPED:
        return "Paused; it continues from here" if to is S.PAUSED else "Stopped: cancelled"
    if event is E.TIMEOUT:
        return _timeout_words(row, to)
    if event is E.FAIL:
        return f"Failed: {row.message}" if row.message else "Failed"
    if event is E.RETRY and row.source == "retry-policy":
        return "Trying again automatically"
    return FIXED.get(event, lambda b: f"{to.value.capitalize()} {b}")(by)


FIXED = {
    E.SUBMIT: lambda by: "Queued" if by == BY["user"] else f"Queued {by}",
    E.COMPLETE: lambda _by: "Finished: the image is saved",
    E.PAUSE: lambda by: f"Paused {by}",
    E.RESUME: lambda by: f"Resumed {by}",
    E.CANCEL: lambda by: f"Cancelled {by}",
    E.RETRY: lambda by: f"Tried again {by}",
}


def _timeout_words(row: TransitionRow, to: JobStatus) -> str:
    why = (
        "the worker was gone when Easel started"
        if row.source == "recovery"
        else "the worker stopped answering"
    )
    then = {S.PAUSED: "; kept paused", S.CANCELLED: "; the cancel stands"}.get(to, "")
    return f"{why[0].upper()}{why[1:]}{then}"


def _where(claim_message: str, host: str | None) -> str:
    """ "claimed by host:pid:token" -> "on this computer" or "on <host>"."""
    worker = WorkerIdentity.parse(claim_message.removeprefix("claimed by "))
    if worker is None:
        return ""
    here = host if host is not None else this_host()
    return "on this computer" if worker.host == here else f"on {worker.host}"


def technical(row: TransitionRow) -> str:
    """The stored row, exactly: "PENDING → PROCESSING · START · worker · claimed by …"."""
    before = row.from_status.value if row.from_status else "new"
    parts = [f"{before} → {row.to_status.value}", row.event.value, row.source, row.message]
    return " · ".join(part for part in parts if part)
