"""The history in the window (issue 15): a search box above the job list, Ctrl+F to reach it.

Real key events; the search runs the engine's word search on the store thread."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.ui.itemmodels.delegates import progress_text
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import FakeWorkers
from tests.ui.helpers import job_in

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000


def listed(window: MainWindow) -> set[int]:
    return {row.id for row in window.vm.jobs.rows()}


def test_typing_a_search_shows_only_matching_prompts(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    red = job_in(queue, JobStatus.PENDING, "a red circle on blue")
    blue = job_in(queue, JobStatus.PENDING, "a blue square")
    qtbot.waitUntil(lambda: listed(window) == {red, blue}, timeout=TIMEOUT_MS)
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.focusWidget() is window.jobs.search
    qtbot.keyClicks(window.jobs.search, "circ*")
    qtbot.waitUntil(lambda: listed(window) == {red}, timeout=TIMEOUT_MS)
    window.jobs.search.clear()
    qtbot.keyClicks(window.jobs.search, "blue -circle")
    qtbot.waitUntil(lambda: listed(window) == {blue}, timeout=TIMEOUT_MS)
    window.jobs.search.clear()  # back to every job
    qtbot.waitUntil(lambda: listed(window) == {red, blue}, timeout=TIMEOUT_MS)


def test_a_search_that_cannot_be_read_says_why_beside_the_box(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    job_in(queue, JobStatus.PENDING, "a red circle")
    qtbot.keyClicks(window.jobs.search, '"red')
    qtbot.waitUntil(window.jobs.search_note.isVisible, timeout=TIMEOUT_MS)
    assert "never closed" in window.jobs.search_note.text()
    assert not window.error_banner.isVisible()  # half-typed text is no error to shout about
    qtbot.keyClicks(window.jobs.search, '"')
    qtbot.waitUntil(lambda: not window.jobs.search_note.isVisible(), timeout=TIMEOUT_MS)
    assert len(listed(window)) == 1


def test_a_search_waits_for_typing_to_pause(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    job_in(queue, JobStatus.PENDING, "a red circle")
    searches: list[str] = []
    real = window.vm.set_search

    def counted(text: str) -> None:
        searches.append(text)
        real(text)

    window.vm.set_search = counted  # type: ignore[method-assign]
    qtbot.keyClicks(window.jobs.search, "lighthouse")
    qtbot.waitUntil(lambda: searches == ["lighthouse"], timeout=TIMEOUT_MS)
    qtbot.wait(400)
    assert searches == ["lighthouse"]  # one search for ten keys


def test_the_status_bar_says_how_long_the_queue_will_take(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    from app.engine.jobs.states import JobEvent

    workers.claiming = False
    now = [1_000_000.0]
    queue.clock = lambda: now[0]
    done = job_in(queue, JobStatus.PENDING, "a finished one")
    queue.claim("w")
    now[0] += 30  # it ran for 30 s: the history learns from it
    queue.fire(done, JobEvent.COMPLETE, source="worker", worker_id="w")
    for _ in range(2):
        job_in(queue, JobStatus.PENDING, "queued")
    window = make_window()
    assert window.deps.settings.workers == 1
    qtbot.waitUntil(lambda: "2 queued, about 1:00 min" in window.counts_label.text(),
                    timeout=TIMEOUT_MS)  # fmt: skip
    # and each queued job says what it is expected to take
    model = window.vm.jobs
    queued = [r for r in model.rows() if r.status is JobStatus.PENDING]
    assert [r.expected_s for r in queued] == [30.0, 30.0]
    text = progress_text(queued[0], 0, queued[0].params.steps, None)  # what the list paints
    assert text == "first in the queue · 10 steps · about 30 s"  # first in the queue's order


def test_view_statistics_charts_the_history(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    for _ in range(2):
        job_in(queue, JobStatus.PENDING, "waiting")
    queue.cancel(job_in(queue, JobStatus.PENDING, "dropped"))
    view = next(m for m in window.menuBar().actions() if m.text() == "&View").menu()
    assert isinstance(view, QMenu)
    [statistics] = [a for a in view.actions() if a.text() == "S&tatistics…"]
    statistics.trigger()
    dialog = window.dialogs.stats_dialog
    assert dialog is not None
    qtbot.waitUntil(lambda: bool(dialog.statuses.bars), timeout=TIMEOUT_MS)
    bars = {label: value for label, value, _shown in dialog.statuses.bars}
    assert bars == {"Cancelled": 1.0, "Pending": 2.0}
    assert dialog.summary.text().startswith("3 jobs")
    assert [label for label, _v, _s in dialog.causes.bars] == ["user cancelled"]
    dialog.grab()  # paints without error


def test_star_from_the_image_panel_marks_the_job_and_its_image(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    from app.engine.outputs.png_star import png_is_starred
    from app.ui.presenters.actions import Action
    from tests.ui.test_keyboard import finished_job, list_with

    job_id = finished_job(queue, tmp_path / "done.png")
    list_with(qtbot, window, job_id)
    star = window.image.follow_ups[Action.STAR]
    qtbot.waitUntil(star.isEnabled, timeout=TIMEOUT_MS)
    assert star.text() == "☆"
    qtbot.mouseClick(star, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: queue.get(job_id).starred, timeout=TIMEOUT_MS)
    # recorded in the PNG too, just after the commit
    qtbot.waitUntil(lambda: png_is_starred(tmp_path / "done.png"), timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: star.text() == "★", timeout=TIMEOUT_MS)
    row = window.vm.jobs.row_of(job_id)
    assert row is not None and window.vm.jobs.rows()[row].starred
    qtbot.mouseClick(star, Qt.MouseButton.LeftButton)  # and off again
    qtbot.waitUntil(lambda: not queue.get(job_id).starred, timeout=TIMEOUT_MS)


def test_move_to_top_from_the_menu_changes_the_claim_order(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    from app.ui.presenters.actions import Action
    from tests.ui.test_keyboard import list_with

    first = job_in(queue, JobStatus.PENDING, "first")
    job_in(queue, JobStatus.PENDING, "second")
    last = job_in(queue, JobStatus.PENDING, "last")
    list_with(qtbot, window, last)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    menu = window.jobs.menu
    assert isinstance(menu, QMenu)
    qtbot.waitUntil(menu.isVisible, timeout=TIMEOUT_MS)
    while menu.activeAction().text() != Action.TOP.label:
        qtbot.keyClick(menu, Qt.Key.Key_Down)
    qtbot.keyClick(menu, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: queue.get(last).priority > queue.get(first).priority,
                    timeout=TIMEOUT_MS)  # fmt: skip
    claimed = queue.claim("w")
    assert claimed is not None and claimed.id == last


def test_dropping_a_queued_job_on_another_runs_it_just_before(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    done = job_in(queue, JobStatus.SUCCESS, "finished")
    first = job_in(queue, JobStatus.PENDING, "first")
    second = job_in(queue, JobStatus.PENDING, "second")
    last = job_in(queue, JobStatus.PENDING, "last")
    model = window.vm.jobs
    # Every row, not only the first: a refresh may run between two of the submits above, and
    # the ones after it come in the next (flaky under load when it waited for `done` alone).
    qtbot.waitUntil(lambda: listed(window) == {done, first, second, last}, timeout=TIMEOUT_MS)

    def index(job_id: int) -> QModelIndex:
        row = model.row_of(job_id)
        assert row is not None
        return model.index(row, 1)

    # What the view does on a drop (a real QDrag blocks in its own event loop offscreen):
    # the dragged rows' data, dropped on a row.
    assert not model.flags(index(done)) & Qt.ItemFlag.ItemIsDragEnabled  # finished: stays
    dragged = model.mimeData([index(last)])
    assert not model.dropMimeData(dragged, Qt.DropAction.MoveAction, -1, -1, index(done))
    assert model.flags(index(last)) & Qt.ItemFlag.ItemIsDragEnabled
    assert not model.dropMimeData(dragged, Qt.DropAction.MoveAction, -1, -1, index(second))
    order: list[int] = []

    def claimed_all() -> bool:
        while (job := queue.claim("w")) is not None:
            order.append(job.id or 0)
        return len(order) == 3

    qtbot.waitUntil(lambda: queue.get(last).priority > queue.get(second).priority,
                    timeout=TIMEOUT_MS)  # fmt: skip
    assert claimed_all() and order == [first, last, second]
