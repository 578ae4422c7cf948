"""What survives a restart (issue 16.3): the prompt settings, and the quit question's promise.

Each test closes a real window and opens a new one on the same window.ini and SQLite queue.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.settings import load_settings, save_settings
from app.ui.widgets.settings_dialog import SettingsDialog
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import FakeWorkers
from tests.ui.helpers import banner_button
from tests.ui.test_number_fields import retype
from tests.ui.test_window import type_and_generate, wait_for

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000


def restore_button(qtbot: QtBot, window: MainWindow, text: str) -> QPushButton:
    return banner_button(qtbot, window.restore_banner, text)


def test_the_prompt_settings_come_back_after_a_restart(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    window = make_window()
    p = window.prompt
    for edit, text in ((p.steps, "33"), (p.cfg, "5.5"), (p.width_box, "320"),
                       (p.height_box, "448"), (p.count, "3")):  # fmt: skip
        retype(qtbot, edit, text)
    qtbot.mouseClick(p.scheduler, Qt.MouseButton.LeftButton)  # open the sampler list
    qtbot.keyClick(p.scheduler.view(), Qt.Key.Key_End)
    qtbot.keyClick(p.scheduler.view(), Qt.Key.Key_Return)
    sampler = p.scheduler.currentText()
    assert sampler != p.scheduler.itemText(0)
    window.close()

    again = make_window().prompt
    shown = [e.text() for e in (again.steps, again.cfg, again.width_box, again.height_box,
                                again.count)]  # fmt: skip
    assert shown == ["33", "5.5", "320", "448", "3"]
    assert again.scheduler.currentText() == sampler
    assert again.generate.text() == "Generate 3 images"
    assert again.prompt.toPlainText() == ""  # the prompt itself starts empty


def test_jobs_paused_at_quit_are_offered_with_resume_all(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.steps_per_poll = 0
    window = make_window()
    job_id = type_and_generate(qtbot, window, "a night market")
    wait_for(qtbot, window, job_id, JobStatus.PROCESSING)
    window.close()  # pauses it (the fake pool, like the supervisor)
    assert queue.get(job_id).status == JobStatus.PAUSED

    workers.claiming = False
    again = make_window()
    assert again.restore_banner.isVisible()
    assert "1 job paused when Easel closed" in again.restore_banner.label.text()
    qtbot.mouseClick(restore_button(qtbot, again, "Resume all"), Qt.MouseButton.LeftButton)
    wait_for(qtbot, again, job_id, JobStatus.PENDING)
    assert not again.restore_banner.isVisible()
    again.close()
    assert not make_window().restore_banner.isVisible()  # offered once


def test_paused_jobs_resume_by_themselves_when_settings_say_so(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.steps_per_poll = 0
    window = make_window()
    dialog = SettingsDialog(load_settings(), save_settings, window, store=window.store)
    qtbot.addWidget(dialog)
    assert not dialog.resume.isChecked()
    qtbot.mouseClick(dialog.resume, Qt.MouseButton.LeftButton)
    dialog.accept()
    job_id = type_and_generate(qtbot, window, "a night market")
    wait_for(qtbot, window, job_id, JobStatus.PROCESSING)
    window.close()
    assert queue.get(job_id).status == JobStatus.PAUSED

    workers.claiming = False
    again = make_window()
    wait_for(qtbot, again, job_id, JobStatus.PENDING)
    assert not again.restore_banner.isVisible()
    assert "Resumed 1 job" in again.statusBar().currentMessage()


def test_progress_memory_and_retention_are_set_in_the_settings_window(qtbot: QtBot) -> None:
    dialog = SettingsDialog(load_settings(), save_settings)
    qtbot.addWidget(dialog)
    for box, typed in (
        (dialog.checkpoint, "30"),
        (dialog.keep_days, "90"),
        (dialog.keep_jobs, "500"),
    ):
        box.selectAll()
        qtbot.keyClicks(box, typed)
    qtbot.mouseClick(dialog.low_vram, Qt.MouseButton.LeftButton)
    on_the_box = QPoint(8, dialog.prune_images.height() // 2)  # short text: not the middle
    qtbot.mouseClick(dialog.prune_images, Qt.MouseButton.LeftButton, pos=on_the_box)
    dialog.accept()
    saved = load_settings()
    assert saved.checkpoint_interval_s == 30 and saved.low_vram
    assert (saved.keep_finished_days, saved.keep_finished_jobs) == (90, 500)
    assert saved.prune_images  # off unless asked
