"""The mask editor with real mouse events: what is painted is the stored mask, pixel for
pixel; eraser, undo/redo, invert, clear and brush keys; an inpaint from the window is a
child of its job with the painted mask stored in the database."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QImage
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from app.engine.jobs.graph import mask_of, parents_of
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.ui.widgets.mask_canvas import MaskCanvas, widget_point
from app.ui.widgets.mask_editor import MaskEditor
from app.ui.widgets.window import MainWindow

TIMEOUT_MS = 5000


def picture(size: tuple[int, int] = (64, 64)) -> QImage:
    image = QImage(size[0], size[1], QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.darkCyan)
    return image


def mask_pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        assert image.mode == "L"
        return np.asarray(image)


def stroke(canvas: MaskCanvas, *points: tuple[float, float]) -> None:
    """Press, move through `points` (image pixels), release: as a mouse does."""
    at = [widget_point(canvas, QPointF(x, y)) for x, y in points]
    QTest.mousePress(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at[0])
    for point in at[1:]:
        QTest.mouseMove(canvas, point)
    QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at[-1])


@pytest.fixture
def editor(qtbot: QtBot) -> MaskEditor:
    editor = MaskEditor(picture(), "a cat")
    qtbot.addWidget(editor)
    editor.show()
    qtbot.waitExposed(editor)
    editor.canvas.fit()
    editor.canvas.hardness = 1.0
    editor.canvas.set_brush_size(8)
    return editor


def test_a_painted_stroke_is_the_mask_and_the_eraser_takes_it_back(editor: MaskEditor) -> None:
    canvas = editor.canvas
    assert canvas.is_empty() and not editor.inpaint.isEnabled()
    stroke(canvas, (8, 32), (30, 32), (56, 32))
    mask = mask_pixels(canvas.mask_png())
    assert mask.shape == (64, 64)
    assert mask[32, 10:55].min() == 255  # along the stroke: repaint
    assert mask[:24].max() == 0 and mask[41:].max() == 0  # a radius of 4 px, no further
    assert editor.inpaint.isEnabled() and editor.buttons["undo"].isEnabled()
    editor.brush.click()  # the eraser
    stroke(canvas, (32, 24), (32, 40))
    erased = mask_pixels(canvas.mask_png())
    assert erased[32, 31:34].max() == 0 and erased[32, 12] == 255
    QTest.keySequence(editor, "Ctrl+Z")
    assert (mask_pixels(canvas.mask_png()) == mask).all()
    QTest.keySequence(editor, "Ctrl+Shift+Z")
    assert (mask_pixels(canvas.mask_png()) == erased).all()


def test_invert_clear_and_brush_size_keys(editor: MaskEditor) -> None:
    canvas = editor.canvas
    stroke(canvas, (10, 10), (20, 10))
    editor.buttons["invert"].click()
    inverted = mask_pixels(canvas.mask_png())
    assert inverted[10, 15] == 0 and inverted[50, 50] == 255
    editor.buttons["clear"].click()
    assert canvas.is_empty()
    QTest.keyClick(editor, Qt.Key.Key_BracketRight)
    assert canvas.brush_size > 8 and editor.size_slider.value() == canvas.brush_size
    QTest.keyClick(editor, Qt.Key.Key_BracketLeft)
    QTest.keyClick(editor, Qt.Key.Key_BracketLeft)
    assert canvas.brush_size < 8


def test_before_and_after(editor: MaskEditor) -> None:
    assert not editor.before_after.isEnabled()
    after = picture()
    after.fill(Qt.GlobalColor.yellow)
    editor.set_result(after)
    assert editor.before_after.isChecked() and editor.canvas.shown == after.convertToFormat(
        QImage.Format.Format_RGB32
    )
    editor.before_after.click()
    assert editor.canvas.shown == editor.canvas.picture


def test_inpaint_from_the_window_stores_the_painted_mask_with_a_child_job(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    parent = queue.submit(GenerationParams("a cat", model="easel-tiny", seed=3))
    output = tmp_path / "cat.png"
    picture().save(str(output))
    assert queue.claim("w", job_id=parent) is not None
    queue.fire(parent, JobEvent.COMPLETE, source="worker", worker_id="w",
               changes={"output_path": str(output)})  # fmt: skip
    qtbot.waitUntil(lambda: window.vm.jobs.rowCount() == 1, timeout=TIMEOUT_MS)
    row = window.vm.jobs.rows()[0]
    editor = window.mask_editing.open(QImage(str(output)), row.id, row.params)
    qtbot.addWidget(editor)
    qtbot.waitExposed(editor)
    editor.canvas.fit()
    editor.canvas.hardness = 1.0
    editor.canvas.set_brush_size(8)
    stroke(editor.canvas, (8, 32), (56, 32))
    painted = mask_pixels(editor.canvas.mask_png())
    editor.prompt.setText("a hat")
    editor.inpaint.click()
    qtbot.waitUntil(lambda: window.vm.jobs.rowCount() == 2, timeout=TIMEOUT_MS)
    child = queue.get(parent + 1)
    assert (child.prompt, child.init_image) == ("a hat", f"job:{parent}")
    assert parents_of(queue, child.id or 0) == [parent]
    stored = mask_of(queue, child)
    assert stored is not None and (mask_pixels(stored) == painted).all()
    assert mask_pixels(stored)[32, 30] == 255


def test_an_empty_mask_cannot_be_inpainted_from_the_window(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    editing: Callable[..., MaskEditor] = window.mask_editing.open
    editor = editing(picture((72, 40)))
    qtbot.addWidget(editor)
    editor.inpaint_requested.emit((editor.settings(), editor.canvas.mask_png()))
    assert "the mask is empty" in editor.status_line.text()
    assert window.vm.jobs.rowCount() == 0


def test_a_loaded_mask_is_the_stored_mask(editor: MaskEditor) -> None:
    grey = QImage(64, 64, QImage.Format.Format_Grayscale8)
    grey.fill(0)
    for x in range(10, 20):
        grey.setPixel(x, 5, 0xFFFFFFFF)
    editor.canvas.load_mask(grey)
    mask = mask_pixels(editor.canvas.mask_png())
    assert mask[5, 10:20].min() == 255 and mask[6:].max() == 0
    assert editor.inpaint.isEnabled() and editor.buttons["undo"].isEnabled()
