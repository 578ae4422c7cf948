"""Settings > New jobs (issue 16.3): defaults set in the dialog with real keys and clicks.

Each test restarts the window (a new MainWindow on the same data folder and SQLite queue)
and reads the queued jobs back from the store.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QComboBox, QDialogButtonBox, QScrollArea, QWidget
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue, params_of
from app.engine.jobs.states import JobStatus
from app.engine.settings import JobDefaults, NewJobValues, load_settings, save_settings
from app.ui.widgets.number_field import FieldNote
from app.ui.widgets.settings_dialog import SettingsDialog
from app.ui.widgets.window import MainWindow
from tests.ui.conftest import fake_models
from tests.ui.fakes import FakeWorkers
from tests.ui.test_number_fields import retype
from tests.ui.test_window import type_and_generate

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000
# Not the engine's defaults anywhere, so a field left alone would show
DEFAULTS = {"steps": "12", "cfg": "6.5", "width": "640", "height": "512", "images": "2"}


def open_settings(qtbot: QtBot, window: MainWindow) -> SettingsDialog:
    """The dialog as the Settings menu opens it, shown (not modal, so the test can type)."""
    dialog = SettingsDialog(
        load_settings(), save_settings, window, store=window.store, models=fake_models()
    )
    qtbot.addWidget(dialog)
    with qtbot.waitActive(dialog):
        dialog.show()
        dialog.activateWindow()
    return dialog


def pick(qtbot: QtBot, box: QComboBox, downs: int) -> None:
    """Open the list with a click, move down `downs` items with the arrow key, press Enter."""
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
    for _ in range(downs):
        qtbot.keyClick(box.view(), Qt.Key.Key_Down)
    qtbot.keyClick(box.view(), Qt.Key.Key_Return)


def type_defaults(qtbot: QtBot, dialog: SettingsDialog) -> None:
    """other-model (the second model), DPM++ 2M and DEFAULTS' numbers."""
    section = dialog.new_jobs
    pick(qtbot, section.model, 1)
    sampler = section.sampler
    pick(qtbot, sampler, sampler.findText("DPM++ 2M") - sampler.currentIndex())
    fields = {"steps": section.steps, "cfg": section.cfg, "width": section.width_box,
              "height": section.height_box, "images": section.images}  # fmt: skip
    for name, edit in fields.items():
        retype(qtbot, edit, DEFAULTS[name])


def save(qtbot: QtBot, dialog: SettingsDialog) -> None:
    buttons = dialog.findChild(QDialogButtonBox)
    assert buttons is not None
    qtbot.mouseClick(
        buttons.button(QDialogButtonBox.StandardButton.Save), Qt.MouseButton.LeftButton
    )


def shown_numbers(window: MainWindow) -> dict[str, str]:
    p = window.prompt
    fields = {"steps": p.steps, "cfg": p.cfg, "width": p.width_box, "height": p.height_box,
              "images": p.count}  # fmt: skip
    return {name: edit.text() for name, edit in fields.items()}


def restart(qtbot: QtBot, window: MainWindow, make_window: Callable[..., MainWindow]) -> MainWindow:
    window.close()
    again = make_window()
    qtbot.waitUntil(lambda: bool(again.prompt.model_choices()), timeout=TIMEOUT_MS)
    return again


def queued_after_ctrl_enter(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, count: int
) -> list[dict[str, object]]:
    """Type a prompt, Ctrl+Enter, and read the `count` new jobs' settings from the store."""
    type_and_generate(qtbot, window, "a kite over the dunes")
    qtbot.waitUntil(lambda: len(queue.jobs([JobStatus.PENDING])) == count, timeout=TIMEOUT_MS)
    settings = []
    for job in queue.jobs([JobStatus.PENDING]):
        p = params_of(job)
        settings.append({"model": p.model, "sampler": p.scheduler, "steps": p.steps,
                         "cfg": p.cfg, "width": p.width, "height": p.height})  # fmt: skip
    return settings


def test_new_jobs_start_with_the_defaults_set_in_settings(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.claiming = False  # jobs stay PENDING with the settings they were queued with
    window = make_window()
    retype(qtbot, window.prompt.steps, "33")  # last used: not what the next launch shows
    dialog = open_settings(qtbot, window)
    pick(qtbot, dialog.new_jobs.start_with, 1)  # "these defaults"
    type_defaults(qtbot, dialog)
    save(qtbot, dialog)
    assert not dialog.isVisible()
    assert load_settings().new_jobs_start_with is NewJobValues.DEFAULTS

    again = restart(qtbot, window, make_window)
    assert shown_numbers(again) == DEFAULTS
    assert (again.prompt.model_name(), again.prompt.scheduler.currentText()) == (
        "other-model", "DPM++ 2M"
    )  # fmt: skip
    assert again.prompt.generate.text() == "Generate 2 images"
    expected = {"model": "other-model", "sampler": "DPM++ 2M", "steps": 12, "cfg": 6.5,
                "width": 640, "height": 512}  # fmt: skip
    assert queued_after_ctrl_enter(qtbot, again, queue, 2) == [expected, expected]


def test_with_last_used_chosen_the_last_values_come_back(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.claiming = False
    window = make_window()
    p = window.prompt
    for edit, text in ((p.steps, "33"), (p.cfg, "5"), (p.width_box, "72"),
                       (p.height_box, "56")):  # fmt: skip
        retype(qtbot, edit, text)
    dialog = open_settings(qtbot, window)
    assert dialog.new_jobs.start_with.currentData() == NewJobValues.LAST_USED.value
    type_defaults(qtbot, dialog)
    save(qtbot, dialog)
    assert load_settings().new_job_defaults == JobDefaults("other-model", "DPM++ 2M", 12, 6.5,
                                                           640, 512, 2)  # fmt: skip

    again = restart(qtbot, window, make_window)
    assert shown_numbers(again) == {"steps": "33", "cfg": "5", "width": "72", "height": "56",
                                    "images": "1"}  # fmt: skip
    assert again.prompt.model_name() == "easel-tiny"
    last = {"model": "easel-tiny", "sampler": "Euler", "steps": 33, "cfg": 5.0, "width": 72,
            "height": 56}  # fmt: skip
    assert queued_after_ctrl_enter(qtbot, again, queue, 1) == [last]

    qtbot.mouseClick(again.prompt.reset, Qt.MouseButton.LeftButton)  # "Reset to defaults"
    assert shown_numbers(again) == DEFAULTS
    assert again.prompt.model_name() == "other-model"


def test_a_default_out_of_range_is_refused_inline_and_not_saved(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    window = make_window()
    dialog = open_settings(qtbot, window)
    steps = dialog.new_jobs.steps
    retype(qtbot, steps, "999")
    assert steps.text() == "999"  # every key kept
    assert steps.property("invalid") is True
    assert "max 150" in [note.text() for note in dialog.new_jobs.findChildren(FieldNote)]
    retype(qtbot, dialog.new_jobs.width_box, "641")
    save(qtbot, dialog)
    assert dialog.isVisible()
    assert dialog.error.text() == (
        "Not saved: Steps must be between 1 and 150, not 999; Width must be a multiple of 8, "
        "not 641"
    )
    assert QApplication.focusWidget() is steps
    assert load_settings().new_job_defaults == JobDefaults()  # nothing written


def test_on_a_small_screen_the_dialog_fits_and_scrolls_to_a_refused_default(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    window = make_window()
    dialog = open_settings(qtbot, window)
    assert dialog.height() <= dialog.screen().availableGeometry().height()
    dialog.resize(dialog.width(), 250)  # a small screen, less the panel and the title
    area = dialog.findChild(QScrollArea)
    assert area is not None
    images = dialog.new_jobs.images  # the lowest field of the New jobs column
    retype(qtbot, images, "99")
    area.verticalScrollBar().setValue(0)  # as if the artist scrolled back up, then saved
    assert not in_view(area, images)
    save(qtbot, dialog)
    assert QApplication.focusWidget() is images
    assert in_view(area, images)


def in_view(area: QScrollArea, widget: QWidget) -> bool:
    top_left = widget.mapTo(area.viewport(), widget.rect().topLeft())
    return area.viewport().rect().contains(top_left)
