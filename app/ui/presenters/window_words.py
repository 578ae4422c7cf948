"""The main window's sentences: the restore banner, the undo banner, the counts in the
status bar and About. Qt-free, so they are tested without a window.

Every string keeps the "MainWindow" translation context it had inside the window, so the
committed translations (resources/i18n) still apply.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from app import __version__
from app.engine.crash import UncleanExit
from app.engine.jobs.states import JobStatus
from app.engine.paths import data_dir, database_path, logs_dir
from app.ui.presenters.i18n import translate
from app.ui.presenters.interfaces import RestoreSummary
from app.ui.presenters.queue_service import CancelOutcome
from app.ui.presenters.rows import format_duration


def jobs_words(n: int) -> str:
    """ "1 job", "3 jobs"."""
    if n == 1:
        return translate("MainWindow", "1 job")
    return translate("MainWindow", "{n} jobs").format(n=n)


# --- the restore banner -----------------------------------------------------------------------


def restore_text(
    restore: RestoreSummary | None, paused_at_quit: Sequence[int], unclean: UncleanExit | None
) -> str:
    """What the launch restored, the jobs paused at quit, and whether the last run ended
    without closing ("" when there is nothing to say)."""
    text = restore.describe() if restore else ""
    # A job the launch's recovery paused is already counted in its summary: not twice.
    at_quit = [i for i in paused_at_quit if not restore or i not in restore.paused]
    if at_quit:
        one = len(at_quit) == 1
        waiting = (
            translate("MainWindow", "1 job paused when Easel closed: it continues when you resume")
            if one
            else translate(
                "MainWindow", "{jobs} paused when Easel closed: they continue when you resume"
            ).format(jobs=jobs_words(len(at_quit)))
        )
        text = "; ".join(filter(None, [text, waiting]))
    if unclean is not None:
        nothing = translate("MainWindow", "No jobs needed restoring.")
        text = f"{describe_unclean_exit(unclean)} {text or nothing}"
    return text


def resumed_note(n: int) -> str:
    return translate("MainWindow", "Resumed {jobs} paused when Easel last closed").format(
        jobs=jobs_words(n)
    )


def describe_unclean_exit(unclean: UncleanExit) -> str:
    if unclean.crash_log:
        return translate("MainWindow", "Easel did not close cleanly last time (it crashed).")
    return translate(
        "MainWindow",
        "Easel did not close cleanly last time (it was killed or the computer stopped).",
    )


# --- the undo banner --------------------------------------------------------------------------


def stopped_words(outcome: CancelOutcome) -> list[str]:
    """Running jobs a cancel stops, each with the progress that is lost. No step number:
    the worker stops after the step it is in, and the row then shows the one it stopped at
    (a number here would be one behind the row's)."""
    return [
        translate(
            "MainWindow", "job {id} stops after its current step, its progress is discarded"
        ).format(id=row.id)
        for row in outcome.stopped
    ]


def undo_offer_text(outcome: CancelOutcome, undo_ms: int) -> str:
    text = translate("MainWindow", "{jobs} will be cancelled in {n} s").format(
        jobs=jobs_words(len(outcome.held)), n=undo_ms // 1000
    )
    return "; ".join([text, *stopped_words(outcome)])


def cancelled_note(outcome: CancelOutcome) -> str:
    """A cancel with nothing to undo: what it stopped ("" if nothing was running)."""
    lost = stopped_words(outcome)
    return translate("MainWindow", "Cancelled {jobs}").format(jobs="; ".join(lost)) if lost else ""


def kept_note(outcome: CancelOutcome) -> str:
    return translate("MainWindow", "Kept {jobs}").format(jobs=jobs_words(len(outcome.held)))


# --- the status bar ---------------------------------------------------------------------------


def counts_text(counts: dict[JobStatus, int], eta_s: float | None) -> str:
    """ "2 running · 12 queued, about 3 min · 40 jobs" (the estimate: learned, see ETA)."""
    running = sum(counts.get(s, 0) for s in JobStatus if s.is_running)
    queued = counts.get(JobStatus.PENDING, 0)
    if eta_s is not None:
        waiting = translate("MainWindow", "{queued} queued, about {eta}").format(
            queued=queued, eta=format_duration(eta_s)
        )
    else:
        waiting = translate("MainWindow", "{queued} queued").format(queued=queued)
    return translate("MainWindow", "{running} running · {waiting} · {jobs}").format(
        running=running, waiting=waiting, jobs=jobs_words(sum(counts.values()))
    )


def is_busy(counts: dict[JobStatus, int]) -> bool:
    """Anything running or queued: then the queue's ETA is worth learning."""
    return any(counts.get(s, 0) for s in JobStatus if s.is_running or s is JobStatus.PENDING)


# --- About ------------------------------------------------------------------------------------


def about_text(device: str | None) -> str:
    rows = [
        (translate("MainWindow", "Version"), __version__),
        (translate("MainWindow", "Data folder"), str(data_dir())),
        (translate("MainWindow", "Database"), str(database_path())),
        (
            translate("MainWindow", "Device"),
            device or translate("MainWindow", "known once a worker is ready"),
        ),
        (translate("MainWindow", "Logs"), str(logs_dir())),
    ]
    cells = "".join(
        f"<tr><td><b>{k}</b>&nbsp;&nbsp;</td><td>{html.escape(v)}</td></tr>" for k, v in rows
    )
    tagline = translate("MainWindow", "Local image generation where no job ever vanishes.")
    intro = f"<h3>Easel</h3><p>{html.escape(tagline)}</p>"
    return f"{intro}<table>{cells}</table>"
