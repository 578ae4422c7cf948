"""The main window's sentences, without a window (issue 20.7 moved them out of it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from app.engine.crash import UncleanExit
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.settings import load_settings
from app.ui.presenters.interfaces import RestoreSummary
from app.ui.presenters.queue_service import CancelOutcome
from app.ui.presenters.window_words import (
    cancelled_note,
    counts_text,
    is_busy,
    kept_note,
    restore_text,
    undo_offer_text,
)
from app.ui.widgets.window import MainWindow
from tests.ui.helpers import job_in


def test_the_restore_banner_says_what_came_back_and_what_waits() -> None:
    restore = RestoreSummary(requeued=(1, 2))
    assert restore_text(restore, (), None) == "Restored jobs from the last session: 2 requeued"
    assert restore_text(None, (7,), None) == (
        "1 job paused when Easel closed: it continues when you resume"
    )
    killed = UncleanExit(pid=1, started_at=0.0, crash_log=None, crash_text="")
    assert restore_text(None, (), killed) == (
        "Easel did not close cleanly last time (it was killed or the computer stopped)."
        " No jobs needed restoring."
    )
    crashed = UncleanExit(pid=1, started_at=0.0, crash_log=Path("crash.log"), crash_text="boom")
    assert restore_text(restore, (), crashed).startswith(
        "Easel did not close cleanly last time (it crashed). Restored"
    )


def test_a_job_paused_at_quit_that_recovery_also_paused_is_counted_once() -> None:
    recovered = RestoreSummary(paused=(7,))
    assert restore_text(recovered, (7, 8), None) == (
        "Restored jobs from the last session: 1 paused; "
        "1 job paused when Easel closed: it continues when you resume"
    )
    assert "when Easel closed" not in restore_text(recovered, (7,), None)


def test_the_undo_banner_counts_held_jobs_and_names_lost_progress() -> None:
    held = CancelOutcome(held=(1, 2), requeue_on_undo=(1,))
    assert undo_offer_text(held, 6000) == "2 jobs will be cancelled in 6 s"
    assert kept_note(held) == "Kept 2 jobs"
    assert cancelled_note(CancelOutcome()) == ""


def test_the_status_bar_counts_running_and_queued_jobs() -> None:
    counts = {JobStatus.PROCESSING: 1, JobStatus.PENDING: 3, JobStatus.SUCCESS: 6}
    assert counts_text(counts, None) == "1 running · 3 queued · 10 jobs"
    assert is_busy(counts) and not is_busy({JobStatus.SUCCESS: 6})


def test_the_launch_after_a_killed_window_says_its_workers_paused_their_jobs(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue
) -> None:
    """Issue 28.3: the relaunch said "No jobs needed restoring" while the old workers ran."""
    from app.engine.workers.worker_states import WINDOW_GONE_REASON
    from app.ui.wiring import recover_at_launch

    job_id = job_in(queue, JobStatus.PROCESSING)
    worker = queue.get(job_id).worker_id
    queue.fire(job_id, JobEvent.PAUSE, source="worker", message=WINDOW_GONE_REASON,
               worker_id=worker)  # fmt: skip
    queue.fire(job_id, JobEvent.STOPPED, source="worker", worker_id=worker)
    summary = recover_at_launch(queue, load_settings(), killed_since=time.time() - 60)
    assert isinstance(summary, RestoreSummary)  # else it waits for the store
    assert summary.window_gone == (job_id,) and job_id in summary.paused  # Resume all takes it
    killed = UncleanExit(pid=1, started_at=0.0, crash_log=None, crash_text="")
    text = restore_text(summary, (), killed)
    assert text == (
        "Easel did not close cleanly last time (it was killed or the computer stopped)."
        " The worker of 1 job paused it when the window was gone"
    )
    window = make_window(restore=summary)
    assert "paused it when the window was gone" in window.restore_banner.label.text()
    again = recover_at_launch(queue, load_settings())
    assert isinstance(again, RestoreSummary) and again.window_gone == ()  # a clean last run
