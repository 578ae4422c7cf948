"""Drop targets and seeds as an A1111 user expects them (issue 28.4 and 28.5).

Drops go through Qt's own paths: a text box's drop calls `insertFromMimeData`, a widget's
`dropEvent` (a Drop event is delivered only inside a real drag, so it is sent directly)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPointF, Qt, QTimer, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.ui.widgets.window import MainWindow
from tests.ui.test_keyboard import finished_job, list_with

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000


def file_mime(path: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    mime.setText(QUrl.fromLocalFile(str(path)).toString())  # what file managers add
    return mime


def picture(tmp_path: Path, name: str = "sketch.png") -> Path:
    path = tmp_path / name
    Image.new("RGB", (64, 48), "green").save(path)
    return path


def test_an_image_dropped_on_the_negative_prompt_is_not_pasted_as_text(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    box = window.prompt.negative
    box.setPlainText("blurry")
    mime = file_mime(picture(tmp_path))
    assert box.canInsertFromMimeData(mime)
    box.insertFromMimeData(mime)  # what QPlainTextEdit's drop does
    assert box.toPlainText() == "blurry"  # no file:///...
    qtbot.waitUntil(lambda: window.prompt.init is not None, timeout=TIMEOUT_MS)
    assert "sketch.png" in window.prompt.init_caption.text()


def test_an_image_dropped_on_the_big_image_area_becomes_the_init_image(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    canvas = window.image.canvas
    assert canvas.acceptDrops()
    mime = file_mime(picture(tmp_path))  # kept: the event holds no reference of its own
    event = QDropEvent(QPointF(20, 20), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    canvas.dropEvent(event)
    assert event.isAccepted()
    qtbot.waitUntil(lambda: window.prompt.init is not None, timeout=TIMEOUT_MS)


def test_minus_one_means_random_and_the_toggle_shows_it(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    p = window.prompt
    p.prompt.setPlainText("a cat")
    p.seed.setFocus()
    p.seed.selectAll()
    qtbot.keyClicks(p.seed, "-1")  # A1111's random seed: refused before ("min 0")
    assert p.seed.reading().ok and p.seed.reading().value is None
    assert p.random_seed.isChecked()
    qtbot.mouseClick(p.random_seed, Qt.MouseButton.LeftButton)  # fixed now
    assert not p.random_seed.isChecked() and p.seed.reading().value is not None
    fixed = int(p.seed.text())
    qtbot.mouseClick(p.random_seed, Qt.MouseButton.LeftButton)  # random again
    assert p.seed.text() == "" and p.random_seed.isChecked()
    qtbot.mouseClick(p.random_seed, Qt.MouseButton.LeftButton)  # the fixed seed comes back
    assert p.seed.text() == str(fixed)
    p.seed.setText("-1")
    qtbot.mouseClick(p.generate, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(queue.jobs()) == 1, timeout=TIMEOUT_MS)
    assert queue.jobs()[0].seed >= 0  # drawn at submit, as for an empty field


def test_reuse_seed_takes_only_the_seed(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    job_id = finished_job(queue, tmp_path / "done.png")
    seed = queue.get(job_id).seed
    window.prompt.prompt.setPlainText("my own words")
    list_with(qtbot, window, job_id)
    item = window.image.reuse_seed
    qtbot.waitUntil(item.isEnabled, timeout=TIMEOUT_MS)
    menu = window.image.more_menu

    def pick() -> None:  # the menu runs its own event loop once open: click in it from there
        if not menu.isVisible():
            QTimer.singleShot(50, pick)
            return
        QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(item).center())

    QTimer.singleShot(50, pick)
    qtbot.mouseClick(window.image.more, Qt.MouseButton.LeftButton)  # the More menu
    assert window.prompt.seed.text() == str(seed)
    assert not window.prompt.random_seed.isChecked()
    assert window.prompt.prompt.toPlainText() == "my own words"
    assert queue.get(job_id).status == JobStatus.SUCCESS
