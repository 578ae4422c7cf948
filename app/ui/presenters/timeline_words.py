"""A job's history in an artist's words; the exact technical row stays one hover away.

`plain_words` turns one transition into a short sentence ("Started on this computer",
"Paused by you"); `technical` is the row as stored (statuses, event, source, message, the
worker's id), shown in the timeline's Details view, not in the first tooltip.
"""

from __future__ import annotations

import re

from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.jobs.undo import HOLD_SOURCE
from app.engine.outputs.video import VIDEO
from app.engine.workers.liveness import WorkerIdentity, this_host
from app.engine.workers.worker_states import (
    HANDING_BACK,
    REQUEUED,
    WINDOW_GONE_REASON,
    StartedBy,
)
from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate
from app.ui.presenters.rows import NoteRow, TimelineRow, TransitionRow, status_label

E, S = JobEvent, JobStatus

# Who sent an event, as the sentence names them ("... by you", "... automatically").
BY = {
    "user": QT_TRANSLATE_NOOP("Timeline", "by you"),
    "cli": QT_TRANSLATE_NOOP("Timeline", "from the command line"),
    "shutdown": QT_TRANSLATE_NOOP("Timeline", "because Easel was closing"),
    "supervisor": QT_TRANSLATE_NOOP("Timeline", "by Easel"),
    "retry-policy": QT_TRANSLATE_NOOP("Timeline", "automatically"),
    "watchdog": QT_TRANSLATE_NOOP("Timeline", "by the watchdog"),
    "recovery": QT_TRANSLATE_NOOP("Timeline", "when Easel started"),
}


def plain_words(row: TransitionRow, host: str | None = None) -> str:
    """One sentence for the timeline. `host`: this computer's name (default: looked up)."""
    return spaced(_sentence(row, host))


# A Latin letter or digit right against a Chinese character ("由 Easel请求暂停"): the space
# Chinese typesetting puts between them, which a filled-in {by} cannot know it needs.
_LATIN_HAN = re.compile(r"([A-Za-z0-9])([\u4e00-\u9fff])|([\u4e00-\u9fff])([A-Za-z0-9])")


_RESUMED = re.compile(r"resumed from step (\d+)")  # the worker's note (workers/job_run.py)
# The worker's completion note: the output's path (spaces allowed), up to the next note.
_WROTE = re.compile(r"wrote (.+?)(?:; |$)")
_CONTINUES = re.compile(r"continues from saved step (\d+)")  # the retry policy's (jobs/retry.py)
# A headless worker's own hand-back once its supervisor was gone (worker_states.StartedBy).
_HANDING_BACK = re.compile(rf"{HANDING_BACK}: (?P<what>.+?) (?:\(pid \d+\) )?was gone")
_REQUEUED = re.compile(rf"{REQUEUED} (\d+):")


def spaced(text: str) -> str:
    return _LATIN_HAN.sub(lambda m: " ".join(g for g in m.groups() if g), text)


def _sentence(row: TransitionRow, host: str | None) -> str:
    source = BY.get(row.source)
    by = (
        translate("Timeline", source)
        if source
        else translate("Timeline", "by {who}").format(who=row.source)
    )
    event, to = row.event, row.to_status
    if event is E.START:
        return _picked_up(row.message, host)
    if event is E.PAUSE and row.source == HOLD_SOURCE:  # the window's cancel with Undo
        return translate("Timeline", "Cancelled by you; held a few seconds in case you undo")
    if event is E.PAUSE and row.message == WINDOW_GONE_REASON:
        return translate(
            "Timeline", "Easel's window was gone: its worker pauses after the current step"
        )
    if event is E.PAUSE and (handing := _HANDING_BACK.match(row.message)):
        if handing.group("what") == StartedBy.SERVER.words:
            return translate(
                "Timeline", "Easel's server was gone: its worker puts the job back in the queue"
            )
        return translate(
            "Timeline",
            "Easel's worker supervisor was gone: its worker puts the job back in the queue",
        )
    if event is E.RESUME and row.source == "worker":  # handed back (see above)
        if requeued := _REQUEUED.match(row.message):
            return translate(
                "Timeline",
                "Back in the queue with its progress: any worker continues from step {step}",
            ).format(step=requeued.group(1))
        return translate("Timeline", "Back in the queue: any worker continues it")
    if event is E.RESUME and row.source == HOLD_SOURCE:  # Undo in that time
        return translate("Timeline", "Cancel undone by you; queued again")
    if event in (E.PAUSE, E.CANCEL) and to in (S.PAUSING, S.CANCELLING):
        if event is E.PAUSE:
            asked = translate(
                "Timeline", "Pause asked {by}; the worker stops after its current step"
            )
        else:
            asked = translate(
                "Timeline", "Cancel asked {by}; the worker stops after its current step"
            )
        return asked.format(by=by)
    if event is E.COMPLETE:
        return _finished(row.message)
    if event is E.STOPPED:
        return (
            translate("Timeline", "Paused; it continues from here")
            if to is S.PAUSED
            else translate("Timeline", "Stopped: cancelled")
        )
    if event is E.TIMEOUT:
        return _timeout_words(row, to)
    if event is E.FAIL:
        return (
            translate("Timeline", "Failed: {why}").format(why=row.message)
            if row.message
            else translate("Timeline", "Failed")
        )
    if event is E.RETRY and row.source == "retry-policy":
        if saved := _CONTINUES.search(row.message):
            return translate(
                "Timeline", "Trying again automatically; will continue from step {step}"
            ).format(step=saved.group(1))
        return translate("Timeline", "Trying again automatically")
    if event is E.SUBMIT and row.source == "user":
        return translate("Timeline", "Queued")
    return _fixed(event).format(by=by, status=status_label(to))


def _finished(message: str) -> str:
    """What a finished job saved (an image or a clip), and the saved progress its last
    attempt continued from, said where it shows, not in a hover."""
    wrote = _WROTE.search(message)
    clip = wrote is not None and wrote.group(1).endswith(VIDEO.suffix)
    if resumed := _RESUMED.search(message):
        step = resumed.group(1)
        if clip:
            return translate(
                "Timeline", "Finished: the clip is saved (continued from step {step})"
            ).format(step=step)
        return translate(
            "Timeline", "Finished: the image is saved (continued from step {step})"
        ).format(step=step)
    if clip:
        return translate("Timeline", "Finished: the clip is saved")
    return translate("Timeline", "Finished: the image is saved")


def _fixed(event: JobEvent) -> str:
    """The sentence of an event that needs nothing but who sent it ({by})."""
    if event is E.SUBMIT:
        return translate("Timeline", "Queued {by}")
    if event is E.SUBMIT_AFTER:
        return translate("Timeline", "Queued {by}; waits for the jobs it builds on")
    if event is E.UNBLOCK:
        return translate("Timeline", "The jobs it builds on are done; now queued")
    if event is E.PAUSE:
        return translate("Timeline", "Paused {by}")
    if event is E.RESUME:
        return translate("Timeline", "Resumed {by}")
    if event is E.CANCEL:
        return translate("Timeline", "Cancelled {by}")
    if event is E.RETRY:
        return translate("Timeline", "Tried again {by}")
    return translate("Timeline", "{status} {by}")


def _timeout_words(row: TransitionRow, to: JobStatus) -> str:
    if row.source == "recovery":
        why = translate("Timeline", "The worker was gone when Easel started")
    else:
        why = translate("Timeline", "The worker stopped answering")
    if to is S.PAUSED:
        return translate("Timeline", "{why}; kept paused").format(why=why)
    if to is S.CANCELLED:
        return translate("Timeline", "{why}; the cancel stands").format(why=why)
    return why


def _picked_up(claim_message: str, host: str | None) -> str:
    """ "claimed by host:pid:token" -> "... on this computer" or "... on <host>"."""
    worker = WorkerIdentity.parse(claim_message.removeprefix("claimed by "))
    if worker is None:
        return translate("Timeline", "Started")
    here = host if host is not None else this_host()
    if worker.host == here:
        return translate("Timeline", "Started on this computer")
    return translate("Timeline", "Started on {host}").format(host=worker.host)


def note_words(row: NoteRow) -> str:
    """A note in the timeline ("Callback 1 of 8 to http://…: delivered (HTTP 200), …")."""
    message = row.message
    return message[:1].upper() + message[1:]


def technical(row: TimelineRow) -> str:
    """The stored row, exactly: "PENDING → PROCESSING · START · worker · claimed by …"."""
    if isinstance(row, NoteRow):
        return " · ".join(["note", row.source, row.message])
    before = row.from_status.value if row.from_status else "new"
    parts = [f"{before} → {row.to_status.value}", row.event.value, row.source, row.message]
    return " · ".join(part for part in parts if part)
