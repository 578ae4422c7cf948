"""Follow-up jobs go through the submit-time model check (issue 13's leftover): an upscale
beyond what the model allows, or variations of a model that is gone, are the red banner
at once, and nothing is queued. Real clicks and keys, a real SQLite queue, the real check."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine.generation.request_checks import check_runnable
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.engine.settings import load_settings
from app.ui.presenters.actions import Action
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import FakeWorkers
from tests.ui.test_keyboard import list_with
from tests.ui.test_number_fields import retype

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000
TOO_LARGE = "512x512 is too large for a model trained at 64x64 (at most 256 pixels per side)"


def runnable(params: GenerationParams) -> None:
    """As the app hands it to the window (app.ui.main): the bundled models are found."""
    check_runnable(params, load_settings().model_search_path())


@pytest.fixture
def window(
    qtbot: QtBot, make_window: Callable[..., MainWindow], workers: FakeWorkers
) -> MainWindow:
    workers.claiming = False
    window = make_window(check=runnable)
    with qtbot.waitActive(window):
        window.activateWindow()
    return window


def finished(queue: JobQueue, image: Path, params: GenerationParams) -> int:
    """A job that succeeded with `params` (queued as stored, past any check)."""
    Image.new("RGB", (params.width, params.height), "red").save(image)
    job_id = queue.submit(params)
    queue.claim("w")
    queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id="w",
               changes={"output_path": str(image)})  # fmt: skip
    return job_id


def banner_says(qtbot: QtBot, window: MainWindow, text: str) -> None:
    qtbot.waitUntil(lambda: text in window.error_banner.label.text(), timeout=TIMEOUT_MS)
    assert window.error_banner.isVisible()


def click_follow_up(qtbot: QtBot, window: MainWindow, action: Action) -> None:
    button = window.image.follow_ups[action]
    qtbot.waitUntil(button.isEnabled, timeout=TIMEOUT_MS)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_an_upscale_beyond_the_models_limit_is_refused_at_once(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    big = finished(queue, tmp_path / "big.png",
                   GenerationParams(prompt="a harbour", width=256, height=256))  # fmt: skip
    list_with(qtbot, window, big)
    click_follow_up(qtbot, window, Action.UPSCALE)
    banner_says(qtbot, window, TOO_LARGE)
    assert [job.id for job in queue.jobs()] == [big]  # nothing queued


def test_generate_and_upscale_beyond_the_limit_queues_nothing(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    qtbot.keyClicks(window.prompt.prompt, "a lighthouse")
    retype(qtbot, window.prompt.width_box, "256")
    retype(qtbot, window.prompt.height_box, "256")
    qtbot.mouseClick(window.prompt.generate_upscale, Qt.MouseButton.LeftButton)
    banner_says(qtbot, window, TOO_LARGE)
    assert queue.jobs() == []  # not even the parent


def test_variations_of_a_model_that_is_gone_are_refused_at_once(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    gone = finished(queue, tmp_path / "gone.png",
                    GenerationParams(prompt="a harbour", model="deleted-model"))  # fmt: skip
    list_with(qtbot, window, gone)
    click_follow_up(qtbot, window, Action.VARY)
    dialog = window.follow_ups.variations_dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible, timeout=TIMEOUT_MS)
    spin = dialog.focusWidget()
    assert spin is not None
    qtbot.keyClick(spin, Qt.Key.Key_Return)  # the default: 4
    banner_says(qtbot, window, "Model 'deleted-model' was not found")
    assert [job.id for job in queue.jobs()] == [gone]
