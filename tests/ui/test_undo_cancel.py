"""Cancelling a queued job can be undone for a few seconds (issue 16.6).

Delete in the job list, then the banner's Undo, through the real queue on SQLite; the
history says what happened (held, then queued again or cancelled).
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.jobs.undo import HOLD_MESSAGE, UNDONE_MESSAGE
from app.ui.viewmodels import jobs_viewmodel
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import FakeWorkers
from tests.ui.helpers import banner_button, job_in
from tests.ui.test_keyboard import list_with
from tests.ui.test_window import wait_for

pytestmark = pytest.mark.timeout(60)

S = JobStatus
TIMEOUT_MS = 5000


def undo_button(qtbot: QtBot, window: MainWindow) -> QPushButton:
    return banner_button(qtbot, window.undo_banner, "Undo")


def events(queue: JobQueue, job_id: int) -> list[tuple[JobEvent, str]]:
    return [(JobEvent(t.event), t.message) for t in queue.timeline(job_id)]


def test_undo_puts_a_cancelled_queued_job_back(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    job_id = job_in(queue, S.PENDING)
    list_with(qtbot, window, job_id)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Delete)
    qtbot.waitUntil(window.undo_banner.isVisible, timeout=TIMEOUT_MS)
    assert window.undo_banner.label.text() == "1 job will be cancelled in 6 s"
    assert queue.get(job_id).status == S.PAUSED  # held: no worker can take it meanwhile
    qtbot.mouseClick(undo_button(qtbot, window), Qt.MouseButton.LeftButton)
    # The store, not the list: the list may still show the PENDING it had before the hold.
    qtbot.waitUntil(lambda: queue.get(job_id).status == S.PENDING, timeout=TIMEOUT_MS)
    assert not window.undo_banner.isVisible()
    assert events(queue, job_id)[1:] == [
        (JobEvent.PAUSE, HOLD_MESSAGE), (JobEvent.RESUME, UNDONE_MESSAGE)
    ]  # fmt: skip


def test_without_undo_the_job_is_cancelled(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs_viewmodel, "UNDO_MS", 200)
    job_id = job_in(queue, S.PENDING)
    list_with(qtbot, window, job_id)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Delete)
    wait_for(qtbot, window, job_id, S.CANCELLED)
    assert [e for e, _m in events(queue, job_id)] == [
        JobEvent.SUBMIT, JobEvent.PAUSE, JobEvent.CANCEL
    ]  # fmt: skip
    qtbot.waitUntil(lambda: not window.undo_banner.isVisible(), timeout=TIMEOUT_MS)


def test_a_paused_job_cancelled_and_undone_stays_paused(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    job_id = job_in(queue, S.PAUSED)
    list_with(qtbot, window, job_id)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Delete)
    qtbot.waitUntil(window.undo_banner.isVisible, timeout=TIMEOUT_MS)
    qtbot.mouseClick(undo_button(qtbot, window), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "Kept 1 job", timeout=TIMEOUT_MS)
    assert queue.get(job_id).status == S.PAUSED
    assert len(events(queue, job_id)) == 2  # SUBMIT, PAUSE: the cancel never happened


def test_cancelling_a_running_job_is_at_once_and_says_what_is_lost(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, workers: FakeWorkers
) -> None:
    job_id = job_in(queue, S.PROCESSING)
    queue.report_progress(job_id, "test-worker", 7, 20)
    list_with(qtbot, window, job_id)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Delete)
    wait_for(qtbot, window, job_id, S.CANCELLING)
    assert not window.undo_banner.isVisible()
    assert window.statusBar().currentMessage() == (
        f"Cancelled job {job_id} stops after its current step, its progress is discarded"
    )


def test_quitting_during_the_undo_time_cancels(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    job_id = job_in(queue, S.PENDING)
    list_with(qtbot, window, job_id)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Delete)
    qtbot.waitUntil(window.undo_banner.isVisible, timeout=TIMEOUT_MS)
    window.close()
    assert queue.get(job_id).status == S.CANCELLED


def test_the_window_offers_undo_as_long_as_the_engine_holds_a_job() -> None:
    from app.engine.jobs.undo import UNDO_DEADLINE_S, UNDO_WINDOW_S

    assert jobs_viewmodel.UNDO_MS == UNDO_WINDOW_S * 1000
    assert UNDO_DEADLINE_S > UNDO_WINDOW_S  # the stored time never cuts a live offer short


def test_a_job_held_for_undo_shows_as_being_cancelled_with_only_undo(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    """Issue 28.3: it looked paused (Resume enabled); the timeline then said "Resumed by you"."""
    from app.ui.itemmodels.job_list_model import Col
    from app.ui.presenters.actions import Action

    job_id = job_in(queue, S.PENDING)
    list_with(qtbot, window, job_id)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Delete)
    model = window.vm.jobs

    def row_says(text: str) -> bool:
        row = model.row_of(job_id)
        return row is not None and model.index(row, Col.STATUS).data() == text

    qtbot.waitUntil(lambda: row_says("Being cancelled"), timeout=TIMEOUT_MS)
    window.jobs.select_jobs([job_id])
    buttons = window.jobs.buttons
    qtbot.waitUntil(lambda: buttons[Action.UNDO].isVisible(), timeout=TIMEOUT_MS)
    enabled = [action for action, button in buttons.items() if button.isEnabled()]
    assert enabled == [Action.UNDO]  # not Resume, not Cancel again
    assert "is being cancelled" in window.image.canvas.placeholder
    qtbot.mouseClick(buttons[Action.UNDO], Qt.MouseButton.LeftButton)  # the list's own Undo
    qtbot.waitUntil(lambda: queue.get(job_id).status == S.PENDING, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: row_says("Pending"), timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: not buttons[Action.UNDO].isVisible(), timeout=TIMEOUT_MS)
    window.jobs.select_jobs([job_id])
    timeline = window.timeline.model
    qtbot.waitUntil(lambda: len(timeline.transitions()) == 3, timeout=TIMEOUT_MS)
    words = [timeline.index(r, 1, timeline.index(0, 0)).data() for r in range(3)]
    assert words[1:] == [
        "Cancelled by you; held a few seconds in case you undo",
        "Cancel undone by you; queued again",
    ]
