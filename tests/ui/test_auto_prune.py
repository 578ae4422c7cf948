"""The window prunes by the settings by itself: every interval, off the GUI thread, and at
once when the Settings window changes how long finished jobs are kept; it says what went."""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.settings import Settings, load_settings
from app.ui.widgets.settings_dialog import SettingsDialog
from app.ui.widgets.window import MainWindow
from app.ui.wiring import prune_by_settings
from tests.engine.history.conftest import old_and_kept_jobs
from tests.ui.fakes import FakeWorkers
from tests.ui.helpers import noting

LONG_AGO = 1_000.0
WAIT_MS = 20_000


def left(queue: JobQueue) -> set[int]:
    return {job.id or 0 for job in queue.jobs(limit=None)}


def test_the_window_prunes_each_interval_and_at_once_when_settings_change(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.claiming = False
    old = JobQueue(queue.db, clock=lambda: LONG_AGO)
    first, keepers = old_and_kept_jobs(old, 3)
    threads: list[threading.Thread] = []

    def prune(settings: Settings) -> str:
        threads.append(threading.current_thread())
        return prune_by_settings(queue, settings)

    window = make_window(prune=prune, prune_every_s=3600)
    window.start_pruning()  # as the launch does once the store is recovered
    qtbot.waitUntil(lambda: len(threads) == 1, timeout=WAIT_MS)
    assert left(queue) >= set(first)  # the default settings keep everything
    assert threading.main_thread() not in threads

    def keep_for_a_month() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, SettingsDialog)
        dialog.keep_days.setValue(30)
        dialog.accept()

    QTimer.singleShot(0, keep_for_a_month)
    window.open_settings()  # returns once the dialog is saved
    assert load_settings().keep_finished_days == 30
    qtbot.waitUntil(lambda: left(queue) == set(keepers.values()), timeout=WAIT_MS)
    qtbot.waitUntil(
        noting(window, "Removed 3 finished jobs older than 30 days; freed "), timeout=WAIT_MS
    )

    window.pruner.timer.setInterval(50)  # the hourly pass, without waiting an hour
    [later] = old.submit_many([GenerationParams("finished long ago, found later")])
    old.cancel(later)
    qtbot.waitUntil(lambda: later not in left(queue), timeout=WAIT_MS)
    qtbot.waitUntil(
        noting(window, "Removed 1 finished job older than 30 days; freed "), timeout=WAIT_MS
    )
    assert left(queue) == set(keepers.values())
    assert threading.main_thread() not in threads
