"""Edit with words from the window, with real clicks and keys on a real SQLite queue and the
real submit check: "Edit with words…" under a result opens the dialog, the typed
instruction is queued as an edit that is the job's child, and its finished image shows
with the before/after toggle; a pasted picture is stored with its edit; with no model that
edits installed the dialog says so in one sentence and queues nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage
from pytestqt.qtbot import QtBot

from app.engine import paths
from app.engine.jobs.graph import init_image_of, parents_of
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.ui.presenters.actions import Action
from app.ui.presenters.model_choices import ModelChoice
from app.ui.widgets.edit_dialog import EditDialog
from app.ui.widgets.window import MainWindow
from tests.edit_models import write_kontext_index
from tests.ui import conftest
from tests.ui.conftest import fake_models
from tests.ui.fakes import FakeWorkers
from tests.ui.test_follow_up_checks import click_follow_up, finished, runnable
from tests.ui.test_keyboard import list_with

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000
KONTEXT = ModelChoice("kontext", "Flux.1 Kontext", 1024, max_side=2048, edits=True)


@pytest.fixture
def window(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    workers: FakeWorkers,
    monkeypatch: pytest.MonkeyPatch,
) -> MainWindow:
    """The window over the real submit check, a Kontext folder among the models (the
    scan's answer and the files the check reads)."""
    workers.claiming = False
    write_kontext_index(paths.models_dir() / "kontext")
    monkeypatch.setattr(conftest, "fake_models", lambda: [*fake_models(), KONTEXT])
    window = make_window(check=runnable)
    # The scan answers off the GUI thread: the dialog lists what it has answered.
    qtbot.waitUntil(lambda: KONTEXT in window.prompt.model_choices(), timeout=TIMEOUT_MS)
    with qtbot.waitActive(window):
        window.activateWindow()
    return window


def only_dialog(qtbot: QtBot, window: MainWindow) -> EditDialog:
    qtbot.waitUntil(lambda: len(window.follow_ups.word_edits.dialogs) == 1, timeout=TIMEOUT_MS)
    dialog = window.follow_ups.word_edits.dialogs[0]
    qtbot.waitExposed(dialog)
    return dialog


def ask(qtbot: QtBot, dialog: EditDialog, instruction: str) -> int:
    """Type `instruction`, click Edit: the new job's id, once queued."""
    assert not dialog.edit.isEnabled()  # nothing to do yet
    qtbot.keyClicks(dialog.instruction, instruction)
    qtbot.mouseClick(dialog.edit, Qt.MouseButton.LeftButton)

    def queued() -> None:  # on timeout, what the dialog said instead
        assert "queued as job" in dialog.status_line.text(), dialog.status_line.text()

    qtbot.waitUntil(queued, timeout=TIMEOUT_MS)
    return int(dialog.status_line.text().rsplit(" ", 1)[-1])


def test_an_edit_of_a_result_is_its_child_and_its_image_comes_back_before_and_after(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    cat = finished(queue, tmp_path / "cat.png", GenerationParams("a cat", width=64, height=48))
    list_with(qtbot, window, cat)
    click_follow_up(qtbot, window, Action.EDIT)
    dialog = only_dialog(qtbot, window)
    assert dialog.model.currentText() == "kontext" and dialog.model.count() == 1
    assert not dialog.thumbnail.pixmap().isNull() and not dialog.before_after.isEnabled()
    edit_id = ask(qtbot, dialog, "make it night")
    edit = queue.get(edit_id)
    assert (edit.kind, edit.prompt, edit.model) == ("edit", "make it night", "kontext")
    assert (edit.init_image, edit.width, edit.height) == (f"job:{cat}", 64, 48)
    assert parents_of(queue, edit_id) == [cat]
    night = tmp_path / "night.png"
    Image.new("RGB", (64, 48), "navy").save(night)
    assert queue.claim("w", job_id=edit_id) is not None
    queue.fire(edit_id, JobEvent.COMPLETE, source="worker", worker_id="w",
               changes={"output_path": str(night)})  # fmt: skip
    qtbot.waitUntil(lambda: dialog.shown_image() == "after", timeout=TIMEOUT_MS)
    assert dialog.thumbnail.pixmap().toImage().pixelColor(5, 5).blue() > 100  # the navy one
    qtbot.keyClick(dialog, Qt.Key.Key_B)
    assert dialog.shown_image() == "before" and dialog.before_after.text() == "After"


def test_a_pasted_picture_is_stored_with_its_edit(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    picture = QImage(64, 48, QImage.Format.Format_RGB32)
    picture.fill(Qt.GlobalColor.darkGreen)
    QGuiApplication.clipboard().setImage(picture)
    dialog = window.follow_ups.word_edits.open_pasted()
    assert dialog is not None
    qtbot.waitExposed(dialog)
    edit = queue.get(ask(qtbot, dialog, "add a hat"))
    assert edit.kind == "edit" and edit.init_image.startswith("upload:")
    assert init_image_of(queue, edit) is not None and (edit.width, edit.height) == (64, 48)


def test_with_no_model_that_edits_the_dialog_says_so_and_queues_nothing(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, tmp_path: Path
) -> None:
    window = make_window(check=runnable)  # the usual models: none of them edits
    qtbot.waitUntil(lambda: bool(window.prompt.model_choices()), timeout=TIMEOUT_MS)
    cat = finished(queue, tmp_path / "cat.png", GenerationParams("a cat", width=64, height=64))
    list_with(qtbot, window, cat)
    click_follow_up(qtbot, window, Action.EDIT)
    dialog = only_dialog(qtbot, window)
    qtbot.keyClicks(dialog.instruction, "make it night")
    qtbot.mouseClick(dialog.edit, Qt.MouseButton.LeftButton)
    sentence = dialog.status_line.text()
    assert sentence.startswith(
        "No model that edits is installed: put a Flux.1 Kontext, Qwen-Image-Edit or "
        "Qwen-Image-Edit Plus model"
    )
    assert sentence.endswith("in the models folder.") and "\n" not in sentence
    assert not dialog.edit.isEnabled() and [job.id for job in queue.jobs()] == [cat]


def test_an_edit_of_an_unfinished_job_waits_for_it_and_shows_its_picture_when_done(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    cat = queue.submit(GenerationParams("a cat", width=64, height=64))  # still queued
    list_with(qtbot, window, cat)
    click_follow_up(qtbot, window, Action.EDIT)
    dialog = only_dialog(qtbot, window)
    assert dialog.thumbnail.pixmap().isNull() and "once its job" in dialog.thumbnail.text()
    edit = queue.get(ask(qtbot, dialog, "make it night"))
    assert (edit.status, edit.init_image) == ("BLOCKED", f"job:{cat}")
    finished_cat = tmp_path / "cat.png"
    Image.new("RGB", (64, 64), "red").save(finished_cat)
    assert queue.claim("w", job_id=cat) is not None
    queue.fire(cat, JobEvent.COMPLETE, source="worker", worker_id="w",
               changes={"output_path": str(finished_cat)})  # fmt: skip
    qtbot.waitUntil(lambda: not dialog.thumbnail.pixmap().isNull(), timeout=TIMEOUT_MS)
    assert dialog.thumbnail.pixmap().toImage().pixelColor(5, 5).red() > 200


def test_the_model_scan_says_which_models_edit(tmp_path: Path) -> None:
    """What the dialog lists comes from the engine's family declarations (no torch)."""
    from app.engine.settings import Settings
    from app.ui.wiring import model_choices

    write_kontext_index(tmp_path / "models" / "kontext")
    choices = {c.name: c for c in model_choices(Settings(models_dir=str(tmp_path / "models")))}
    assert choices["kontext"].edits and choices["kontext"].kind == "Flux.1 Kontext"
    assert not choices["easel-tiny"].edits  # the bundled model draws from a prompt
