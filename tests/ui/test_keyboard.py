"""The window from the keyboard alone (issue 16.2): real key events, a real SQLite queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.ui.presenters import shortcuts
from app.ui.widgets.window import MainWindow
from tests.ui.helpers import job_in
from tests.ui.test_window import wait_for

pytestmark = pytest.mark.timeout(60)

S = JobStatus
TIMEOUT_MS = 5000


def focused() -> object:
    return QApplication.focusWidget()


def list_with(qtbot: QtBot, window: MainWindow, *job_ids: int) -> None:
    """Show the jobs, select the first of `job_ids`, and put the keyboard in the list."""
    qtbot.waitUntil(lambda: all(window.vm.jobs.row_of(i) is not None for i in job_ids),
                    timeout=TIMEOUT_MS)  # fmt: skip
    window.jobs.select_jobs([job_ids[0]])
    window.jobs.table.setFocus()
    qtbot.waitUntil(lambda: focused() is window.jobs.table, timeout=TIMEOUT_MS)


def selected_ids(window: MainWindow) -> list[int]:
    return [row.id for row in window.jobs.selected_rows()]


def test_tab_goes_from_generate_to_the_list_and_out_again(qtbot: QtBot, window: MainWindow) -> None:
    window.prompt.generate.setFocus()
    qtbot.keyClick(window.prompt.generate, Qt.Key.Key_Tab)
    assert focused() is window.jobs.table
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Tab)  # not trapped in the cells
    assert focused() is not window.jobs.table
    qtbot.keyClick(focused(), Qt.Key.Key_Backtab)
    assert focused() is window.jobs.table


def test_f6_moves_between_prompt_list_and_timeline(qtbot: QtBot, window: MainWindow) -> None:
    window.prompt.prompt.setFocus()
    visited = []
    for _ in range(3):
        qtbot.keyClick(focused(), Qt.Key.Key_F6)
        visited.append(focused())
    assert visited == [window.jobs.table, window.timeline.tree, window.prompt.prompt]


def test_arrows_start_from_the_selected_row(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    ids = [job_in(queue, S.PAUSED, f"job {n}") for n in range(4)]  # newest first in the list
    list_with(qtbot, window, ids[1])
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Up)
    assert selected_ids(window) == [ids[2]]
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Down)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Down)
    assert selected_ids(window) == [ids[0]]


def test_delete_cancels_the_selected_job(qtbot: QtBot, window: MainWindow, queue: JobQueue) -> None:
    job_id = job_in(queue, S.PROCESSING)
    list_with(qtbot, window, job_id)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Delete)
    wait_for(qtbot, window, job_id, S.CANCELLING)


def test_space_pauses_then_resumes(qtbot: QtBot, window: MainWindow, queue: JobQueue) -> None:
    job_id = job_in(queue, S.PENDING)
    list_with(qtbot, window, job_id)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Space)
    wait_for(qtbot, window, job_id, S.PAUSED)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Space)
    wait_for(qtbot, window, job_id, S.PENDING)


def finished_job(queue: JobQueue, image: Path, colour: str = "red") -> int:
    from PIL import Image

    Image.new("RGB", (64, 48), colour).save(image)
    job_id = job_in(queue, S.PENDING, f"a {colour} field")
    queue.claim("w")
    queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id="w",
               changes={"output_path": str(image)})  # fmt: skip
    return job_id


def test_enter_opens_the_finished_image_in_the_viewer(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    older = finished_job(queue, tmp_path / "older.png", "blue")
    newer = finished_job(queue, tmp_path / "newer.png", "red")
    qtbot.waitUntil(lambda: len(window.gallery_model.paths()) == 2, timeout=TIMEOUT_MS)
    list_with(qtbot, window, newer, older)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Return)
    viewer = window.viewing.viewer
    assert viewer is not None
    qtbot.waitUntil(viewer.isVisible, timeout=TIMEOUT_MS)
    viewer.activateWindow()  # a window manager does this for a new dialog; offscreen has none
    qtbot.waitUntil(viewer.isActiveWindow, timeout=TIMEOUT_MS)
    assert viewer.path == str(tmp_path / "newer.png")
    assert "64×48 · fit" in viewer.caption.text() and "1 of 2" in viewer.caption.text()
    qtbot.keyClick(viewer, Qt.Key.Key_Right)  # the next (older) finished image
    assert viewer.path == str(tmp_path / "older.png")
    assert viewer.image.pixelColor(0, 0).blue() == 255
    qtbot.keyClick(viewer, Qt.Key.Key_1)  # 100 %
    assert viewer.picture.pixmap().size() == viewer.image.size()
    qtbot.keyClick(viewer, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    assert viewer.picture.pixmap().width() == 80  # 64 px × 1.25
    qtbot.keyClick(viewer, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.clipboard().image().size() == viewer.image.size()
    qtbot.keyClick(viewer, Qt.Key.Key_Escape)
    assert not viewer.isVisible()


def test_shift_f10_opens_the_actions_menu_and_enter_runs_one(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    job_id = job_in(queue, S.PENDING)
    list_with(qtbot, window, job_id)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    menu = window.jobs.menu
    assert isinstance(menu, QMenu)
    qtbot.waitUntil(menu.isVisible, timeout=TIMEOUT_MS)
    enabled = [a.text() for a in menu.actions() if a.isEnabled() and not a.isSeparator()]
    assert enabled == ["Cancel", "Pause", "Move up", "Move down", "Move to top", "Move to bottom",
                       "Star", "Upscale ×2", "Variations…", "Edit with words…"]  # fmt: skip
    assert menu.activeAction().text() == "Cancel"
    qtbot.keyClick(menu, Qt.Key.Key_Down)  # to Pause
    qtbot.keyClick(menu, Qt.Key.Key_Return)
    wait_for(qtbot, window, job_id, S.PAUSED)


def test_f1_lists_every_shortcut(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.keyClick(window, Qt.Key.Key_F1)
    dialog = window.dialogs.shortcuts_dialog
    assert dialog is not None and dialog.isVisible()
    document = QTextDocument()
    document.setHtml(dialog.table.text())
    text = document.toPlainText()  # what the reader sees
    for shortcut in shortcuts.ALL:
        assert shortcut.shown in text and shortcut.what in text


def test_double_click_on_the_image_opens_the_viewer(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    job_id = finished_job(queue, tmp_path / "done.png")
    list_with(qtbot, window, job_id)
    qtbot.waitUntil(lambda: window.image.path is not None, timeout=TIMEOUT_MS)
    qtbot.mouseDClick(window.image.canvas, Qt.MouseButton.LeftButton)
    assert window.viewing.viewer is not None and window.viewing.viewer.isVisible()
    assert window.viewing.viewer.path == str(tmp_path / "done.png")
