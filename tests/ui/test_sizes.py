"""Sizes the model refuses or was not trained for are said beside the size (issue 28.4, 28.6)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.ui.widgets.window import MainWindow
from tests.ui.test_drops_and_seeds import file_mime
from tests.ui.test_number_fields import retype

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000


def tiny_model_chosen(qtbot: QtBot, window: MainWindow) -> None:
    # The model scan's answer, not only the default name: its native size and limit.
    qtbot.waitUntil(lambda: window.prompt.model_choice().native_size == 64, timeout=TIMEOUT_MS)


def test_a_size_beyond_training_is_said_and_native_then_upscale_is_offered(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    p = window.prompt
    tiny_model_chosen(qtbot, window)
    assert not p.size_box.isVisible()  # 64 x 64: nothing to say
    p.prompt.setPlainText("a lighthouse")
    retype(qtbot, p.width_box, "256")
    retype(qtbot, p.height_box, "256")
    assert p.size_box.isVisible()
    assert p.size_note.text() == (
        "easel-tiny was trained at 64 px: larger, it repeats the picture in tiles"
    )
    assert not p.size_note.property("invalid")
    assert p.native_upscale.text() == "Generate at 64×64, then upscale"
    qtbot.mouseClick(p.native_upscale, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(queue.jobs()) == 2, timeout=TIMEOUT_MS)
    child, first = queue.jobs()  # newest first
    assert (first.width, first.height) == (64, 64) and first.status == JobStatus.PENDING
    assert child.status == JobStatus.BLOCKED and child.init_image == f"job:{first.id}"
    assert not p.size_box.isVisible()  # the form says 64 x 64 now


def test_a_size_the_model_refuses_is_flagged_before_generate(
    qtbot: QtBot, window: MainWindow
) -> None:
    p = window.prompt
    tiny_model_chosen(qtbot, window)
    retype(qtbot, p.width_box, "296")
    assert p.size_note.text() == "easel-tiny takes at most 256 px a side"
    assert p.size_note.property("invalid") is True  # red


def test_a_dropped_picture_gets_a_size_the_model_takes(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    p = window.prompt
    tiny_model_chosen(qtbot, window)
    picture = tmp_path / "photo.jpg"
    Image.new("RGB", (300, 200), "blue").save(picture)
    p.negative.insertFromMimeData(file_mime(picture))
    qtbot.waitUntil(lambda: p.init is not None, timeout=TIMEOUT_MS)
    assert (p.width_box.text(), p.height_box.text()) == ("256", "168")  # not 296 x 200
    assert not p.model_choice().too_large(256, 168)
