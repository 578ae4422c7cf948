"""Broken model files in the models folder (issue 34): the window's picker lists each as
unsupported with its sentence, and the bundled model is still chosen and submitted, through
the same model scan and submit check the window runs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItemModel
from pytestqt.qtbot import QtBot

from app.engine.generation.request_checks import check_runnable
from app.engine.jobs.queue import JobQueue
from app.engine.paths import models_dir
from app.engine.settings import load_settings
from app.ui.widgets.window import MainWindow
from app.ui.wiring import model_choices
from tests.hostile_files import write_hostile_models

pytestmark = pytest.mark.timeout(60)
TIMEOUT_MS = 5000


def test_the_picker_lists_broken_files_as_unsupported_and_the_default_model_still_works(
    make_window: Callable[..., MainWindow], qtbot: QtBot, queue: JobQueue
) -> None:
    expected = write_hostile_models(models_dir())
    settings = load_settings()
    window = make_window(check=lambda params: check_runnable(params, settings.model_search_path()))
    window.prompt.set_models(model_choices(settings))  # what the window's model scan hands it
    picker = window.prompt.model
    items = picker.model()
    assert isinstance(items, QStandardItemModel)
    rows = {picker.itemData(i): i for i in range(picker.count())}
    for file_name, phrase in expected.items():
        row = rows[file_name.rsplit(".", 1)[0]]
        tooltip = picker.itemData(row, Qt.ItemDataRole.ToolTipRole)
        assert not items.item(row).isEnabled()
        assert tooltip.startswith(f"{file_name} cannot be used: ") and phrase in tooltip
    assert items.item(rows["easel-tiny"]).isEnabled()
    assert window.prompt.model_name() == "easel-tiny"
    window.prompt.prompt.setPlainText("a red kite")
    window.generate()
    qtbot.waitUntil(lambda: len(queue.jobs()) == 1, timeout=TIMEOUT_MS)
    assert queue.jobs()[0].model == "easel-tiny"
    assert not window.error_banner.isVisible()
