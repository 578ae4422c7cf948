"""Window fixtures: a real SQLite queue, fake workers, window settings in the temp folder."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSettings
from pytestqt.qtbot import QtBot

from app.engine.jobs.graph import graph_listener
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.settings import load_settings, save_settings
from app.models.db import Database
from app.ui.presenters.interfaces import RestoreSummary, WorkerPool
from app.ui.presenters.model_choices import ModelChoice
from app.ui.presenters.queue_service import QueueService
from app.ui.widgets.window import Dependencies, MainWindow
from tests.ui.fakes import FakeWorkers


@pytest.fixture(autouse=True)
def collect_between_tests() -> Iterator[None]:
    """The window turns automatic GC off (see app.ui.qt.gc_guard): collect here, on this thread."""
    yield
    gc.collect()


@pytest.fixture
def queue(db: Database) -> JobQueue:
    """As the app opens it (`open_queue`): dependent jobs unblock after their parent's commit."""
    queue = JobQueue(db)
    queue.listeners.append(graph_listener(queue))
    return queue


@pytest.fixture
def workers(queue: JobQueue, tmp_path: Path) -> FakeWorkers:
    return FakeWorkers(queue, tmp_path / "outputs")


@pytest.fixture
def quit_answers() -> list[int]:
    """Running-job counts the quit question was asked with (the fake always says yes)."""
    return []


def fake_models() -> list[ModelChoice]:
    """What the picker gets from the model scan: the tiny bundled model, an SDXL, a bad file."""
    return [
        ModelChoice("easel-tiny", "SD 1.x v-prediction", 64,
                    ((64, 64), (72, 56), (56, 72)), max_side=256),
        ModelChoice("other-model", "SDXL", 1024, ((1024, 1024), (1152, 896)), max_side=4096),
        ModelChoice("refiner", unsupported_reason="an SDXL refiner cannot generate on its own"),
    ]  # fmt: skip


@pytest.fixture
def make_window(
    qtbot: QtBot, queue: JobQueue, workers: FakeWorkers, tmp_path: Path, quit_answers: list[int]
) -> Iterator[Callable[..., MainWindow]]:
    windows: list[MainWindow] = []

    def make(
        restore: RestoreSummary | None = None,
        pool: WorkerPool | None = None,
        confirm: Callable[[int], bool] | None = None,
        shutdown_timeout_s: float = 1.0,
        check: Callable[[GenerationParams], object] | None = None,
        service: QueueService | None = None,  # another window's, on its own connection
        **more: Any,  # other `Dependencies` fields (e.g. prune)
    ) -> MainWindow:
        def yes(n: int) -> bool:
            quit_answers.append(n)
            return True

        deps = Dependencies(
            queue=service or QueueService(queue, check=check), workers=pool or workers,
            settings=load_settings(),
            save_settings=save_settings, list_models=fake_models,
            list_loras=lambda: ["ink_style", "watercolor"],
            restore=restore, confirm_quit=confirm or yes, shutdown_timeout_s=shutdown_timeout_s,
            **more,
        )  # fmt: skip
        store = QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)
        window = MainWindow(deps, settings_store=store)
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        return window

    yield make
    for window in windows:
        if not window.quitting.confirmed:
            window.deps.confirm_quit = lambda _n: True
            window.close()


@pytest.fixture
def window(
    qtbot: QtBot, make_window: Callable[..., MainWindow], workers: FakeWorkers
) -> MainWindow:
    """The window, active (shortcuts only fire in the active window), over workers that
    leave jobs PENDING with the parameters they were submitted with."""
    workers.claiming = False
    window = make_window()
    with qtbot.waitActive(window):
        window.activateWindow()
    return window
