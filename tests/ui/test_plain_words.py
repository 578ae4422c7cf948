"""Start-up and plain words (issue 28.8, 28.9): what a one-computer artist sees first."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMenu, QWidget
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.settings import load_settings, save_settings
from app.ui.itemmodels.delegates import progress_text
from app.ui.qt.theme import style_sheet
from app.ui.widgets.settings_dialog import SettingsDialog
from app.ui.widgets.window import MainWindow
from tests.ui.helpers import job_in

pytestmark = pytest.mark.timeout(60)


def shown_labels(widget: QWidget) -> list[str]:
    return [label.text() for label in widget.findChildren(QLabel) if label.isVisibleTo(widget)]


def test_worker_settings_wait_in_an_advanced_section(qtbot: QtBot) -> None:
    dialog = SettingsDialog(load_settings(), save_settings)
    qtbot.addWidget(dialog)
    dialog.show()
    assert "Heartbeat timeout" not in shown_labels(dialog)
    assert "Models folder" in shown_labels(dialog)
    qtbot.mouseClick(dialog.show_advanced, Qt.MouseButton.LeftButton)
    assert {"Heartbeat timeout", "Max attempts"} <= set(shown_labels(dialog))


def test_check_boxes_are_drawn_visibly_on_the_dark_theme() -> None:
    sheet = style_sheet()
    assert "QCheckBox::indicator" in sheet and "@ICONS@" not in sheet
    tick = sheet.split("image: url(")[1].split(")")[0]
    assert Path(tick).is_absolute() and Path(tick).is_file()


def test_the_models_folder_opens_from_the_view_menu(
    qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[Path] = []

    def open_folder(folder: Path) -> bool:
        opened.append(folder)
        return True

    monkeypatch.setattr(window.file_manager, "open_folder", open_folder)
    menu = next(m for m in window.menuBar().findChildren(QMenu) if m.title() == "&View")
    item = next(a for a in menu.actions() if a.text() == "Open &models folder")
    item.trigger()
    folder = window.deps.settings.models_path()
    assert opened == [folder] and (folder / "lora").is_dir()
    assert str(folder) in window.statusBar().currentMessage()


def test_a_running_job_before_its_first_step_says_the_model_is_loading(
    window: MainWindow, queue: JobQueue, qtbot: QtBot
) -> None:
    job_id = job_in(queue, JobStatus.PROCESSING)
    qtbot.waitUntil(lambda: window.vm.jobs.job(job_id) is not None, timeout=5000)
    row = window.vm.jobs.job(job_id)
    assert row is not None
    assert progress_text(row, 0, 10, None).startswith("loading the model… ")
    assert progress_text(row, 3, 10, None) == "step 3/10"
