"""Edit with words with several input images, driven with real clicks and keys on a real
SQLite queue and the real submit check: the dialog shows each model's own steps and cfg
for an edit (Qwen-Image-Edit Plus 50 and 4, Kontext 28 and 3.5) and, for Edit Plus, the
input images as thumbnails; more are added from a file, a paste and a drop, one is
removed, and the queued edit stores them in order; Kontext shows no input row."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QGuiApplication, QImage
from PySide6.QtWidgets import QFileDialog
from pytestqt.qtbot import QtBot

from app.engine import paths
from app.engine.jobs.graph import edit_images_of, parents_of
from app.engine.jobs.init_image import open_rgb
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.ui.presenters.actions import Action
from app.ui.presenters.model_choices import ModelChoice
from app.ui.widgets.window import MainWindow
from tests.edit_models import write_kontext_index, write_qwen_edit_index
from tests.ui import conftest
from tests.ui.conftest import fake_models
from tests.ui.fakes import FakeWorkers
from tests.ui.test_edit_dialog import KONTEXT, TIMEOUT_MS, ask, only_dialog
from tests.ui.test_follow_up_checks import click_follow_up, finished, runnable
from tests.ui.test_keyboard import list_with

pytestmark = pytest.mark.timeout(60)

PLUS = ModelChoice(
    "plus", "Qwen-Image-Edit Plus", 1024, max_side=2048, edits=True, edit_images=3,
    edit_steps=50, edit_cfg=4.0,
)  # fmt: skip


@pytest.fixture
def window(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    workers: FakeWorkers,
    monkeypatch: pytest.MonkeyPatch,
) -> MainWindow:
    workers.claiming = False
    write_kontext_index(paths.models_dir() / "kontext")
    write_qwen_edit_index(paths.models_dir() / "plus", plus=True)
    monkeypatch.setattr(conftest, "fake_models", lambda: [*fake_models(), KONTEXT, PLUS])
    window = make_window(check=runnable)
    qtbot.waitUntil(lambda: PLUS in window.prompt.model_choices(), timeout=TIMEOUT_MS)
    with qtbot.waitActive(window):
        window.activateWindow()
    return window


def picture_file(path: Path, size: tuple[int, int], colour: str) -> Path:
    Image.new("RGB", size, colour).save(path)
    return path


def click_item(qtbot: QtBot, dialog: object, row: int) -> None:
    inputs = dialog.inputs  # type: ignore[attr-defined]
    rect = inputs.visualItemRect(inputs.item(row))
    qtbot.mouseClick(inputs.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def test_edit_plus_takes_added_pasted_and_dropped_pictures_in_order_with_its_own_defaults(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    cat = finished(queue, tmp_path / "cat.png", GenerationParams("a cat", width=64, height=48))
    list_with(qtbot, window, cat)
    click_follow_up(qtbot, window, Action.EDIT)
    dialog = only_dialog(qtbot, window)
    dialog.model.setFocus()
    qtbot.keyClick(dialog.model, Qt.Key.Key_Home)  # the models that edit: kontext, plus
    assert dialog.model.currentText() == "kontext"
    assert (dialog.steps.value(), dialog.cfg.value()) == (28, 3.5)
    assert not dialog.inputs_row.isVisible()  # Kontext reads one picture
    qtbot.keyClick(dialog.model, Qt.Key.Key_Down)
    assert dialog.model.currentText() == "plus"
    assert (dialog.steps.value(), dialog.cfg.value()) == (50, 4.0)  # its own, shown
    assert dialog.inputs_row.isVisible() and dialog.inputs.count() == 1  # the picture edited
    hat = picture_file(tmp_path / "hat.png", (48, 64), "blue")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *_a, **_k: (str(hat), ""))
    qtbot.mouseClick(dialog.add_image, Qt.MouseButton.LeftButton)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(picture_file(tmp_path / "sofa.png", (32, 32), "red")))])
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                      Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    dialog.dropEvent(drop)  # Qt delivers a Drop only inside a real drag
    assert dialog.inputs.count() == 3 and dialog.inputs_count.text() == "3 of at most 3"
    assert not dialog.add_image.isEnabled() and not dialog.paste_image.isEnabled()
    click_item(qtbot, dialog, 1)  # the hat
    assert dialog.remove_image.isEnabled()
    qtbot.mouseClick(dialog.remove_image, Qt.MouseButton.LeftButton)
    assert dialog.inputs.count() == 2
    pasted = QImage(48, 32, QImage.Format.Format_RGB32)
    pasted.fill(Qt.GlobalColor.darkGreen)
    QGuiApplication.clipboard().setImage(pasted)
    click_item(qtbot, dialog, 0)  # focus on the row; the picture edited cannot be removed
    assert not dialog.remove_image.isEnabled()
    qtbot.keyClick(dialog.inputs, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert dialog.inputs.count() == 3
    edit = queue.get(ask(qtbot, dialog, "the cat on the sofa, in the green light"))
    assert (edit.kind, edit.model, edit.steps, edit.cfg) == ("edit", "plus", 50, 4.0)
    assert (edit.init_image, parents_of(queue, edit.id or 0)) == (f"job:{cat}", [cat])
    sizes = [open_rgb(png).size for png in edit_images_of(queue, edit)]
    assert sizes == [(32, 32), (48, 32)]  # the sofa dropped, then the paste


def test_a_picture_dropped_on_a_one_picture_model_opens_its_own_dialog(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    cat = finished(queue, tmp_path / "cat.png", GenerationParams("a cat", width=64, height=48))
    list_with(qtbot, window, cat)
    click_follow_up(qtbot, window, Action.EDIT)
    dialog = only_dialog(qtbot, window)
    dialog.model.setFocus()
    qtbot.keyClick(dialog.model, Qt.Key.Key_Home)
    assert dialog.model.currentText() == "kontext"
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(picture_file(tmp_path / "dog.png", (32, 32), "red")))])
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                      Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    dialog.dropEvent(drop)
    qtbot.waitUntil(lambda: len(window.follow_ups.word_edits.dialogs) == 2, timeout=TIMEOUT_MS)
    assert dialog.more_images == []


def test_the_model_scan_gives_each_model_that_edits_its_pictures_and_defaults(
    tmp_path: Path,
) -> None:
    """From the engine's family declarations (no torch): what the dialog shows."""
    from app.engine.settings import Settings
    from app.ui.wiring import model_choices

    models = tmp_path / "models"
    write_kontext_index(models / "kontext")
    write_qwen_edit_index(models / "qwen-edit")
    write_qwen_edit_index(models / "plus", plus=True)
    choices = {c.name: c for c in model_choices(Settings(models_dir=str(models)))}
    read = {name: (c.edit_images, c.edit_steps, c.edit_cfg) for name, c in choices.items()}
    assert read["kontext"] == (1, 28, 3.5)
    assert read["qwen-edit"] == (1, 50, 4.0) and read["plus"] == (3, 50, 4.0)
