"""The window with the real supervisor and worker processes (scripted runner, no torch)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.supervisor import Supervisor
from app.engine.workers.worker import default_runner
from app.testing.step_hooks import png_runner
from app.ui.presenters.actions import Action
from app.ui.widgets.window import MainWindow
from tests.engine.workers.worker_fixtures import FAST_POLICY, FAST_SETTINGS, worker_config
from tests.ui.test_window import press, status_of, type_and_generate

# A hang must fail fast, not stall the whole suite (the suite-wide limit is 10 min).
pytestmark = pytest.mark.timeout(60)

S = JobStatus
WAIT_MS = 30_000  # spawned workers on a busy machine; a passing test never waits this long


@pytest.fixture
def supervisor(queue: JobQueue, tmp_path: Path) -> Iterator[Supervisor]:
    config = replace(worker_config(queue, tmp_path), runner_factory=png_runner)
    sup = Supervisor(queue, config, FAST_SETTINGS, policy=FAST_POLICY, workers=1,
                     maintenance_interval_s=0.2)  # fmt: skip
    yield sup
    sup.shutdown(timeout=5.0)


def wait_for(qtbot: QtBot, window: MainWindow, job_id: int, status: JobStatus) -> None:
    qtbot.waitUntil(lambda: status_of(window, job_id) is status, timeout=WAIT_MS)


def test_generate_progress_success_and_image(
    qtbot: QtBot, make_window: Callable[..., MainWindow], supervisor: Supervisor
) -> None:
    window = make_window(pool=supervisor)
    supervisor.start()
    job_id = type_and_generate(qtbot, window, "a red fox step=0.05")
    qtbot.waitUntil(lambda: window.vm.live.get(job_id) is not None, timeout=WAIT_MS)
    wait_for(qtbot, window, job_id, S.SUCCESS)
    qtbot.waitUntil(lambda: window.image.path is not None, timeout=WAIT_MS)
    assert window.image.canvas.image is not None


def test_cancel_shows_cancelling_then_cancelled(
    qtbot: QtBot, make_window: Callable[..., MainWindow], supervisor: Supervisor
) -> None:
    window = make_window(pool=supervisor)
    supervisor.start()
    window.prompt.steps.setValue(150)
    job_id = type_and_generate(qtbot, window, "a slow storm step=0.1")
    wait_for(qtbot, window, job_id, S.PROCESSING)
    press(qtbot, window, Action.CANCEL)
    wait_for(qtbot, window, job_id, S.CANCELLED)

    def shown() -> list[JobStatus]:
        return [t.to_status for t in window.timeline.model.transitions()]

    qtbot.waitUntil(lambda: S.CANCELLED in shown(), timeout=WAIT_MS)
    path = shown()
    assert path[-2:] == [S.CANCELLING, S.CANCELLED]


def test_pause_resume_success(
    qtbot: QtBot, make_window: Callable[..., MainWindow], supervisor: Supervisor
) -> None:
    window = make_window(pool=supervisor)
    supervisor.start()
    window.prompt.steps.setValue(40)
    job_id = type_and_generate(qtbot, window, "a quiet lake step=0.05")
    qtbot.waitUntil(lambda: (r := window.vm.jobs.job(job_id)) is not None and r.progress_step > 0,
                    timeout=WAIT_MS)  # fmt: skip
    press(qtbot, window, Action.PAUSE)
    wait_for(qtbot, window, job_id, S.PAUSED)
    row = window.vm.jobs.job(job_id)
    assert row is not None
    paused_at = row.progress_step
    assert 0 < paused_at < 40
    press(qtbot, window, Action.RESUME)
    wait_for(qtbot, window, job_id, S.SUCCESS)
    statuses = [t.to_status for t in window.deps.queue.timeline(job_id)]
    assert S.PAUSING in statuses and S.PAUSED in statuses and statuses[-1] is S.SUCCESS


def test_quit_pauses_a_running_job_at_its_step(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, supervisor: Supervisor
) -> None:
    """Closing the window with a job running pauses it through the real supervisor."""
    window = make_window(pool=supervisor, shutdown_timeout_s=10.0)
    supervisor.start()
    window.prompt.steps.setValue(150)
    job_id = type_and_generate(qtbot, window, "a night market step=0.05")
    qtbot.waitUntil(lambda: queue.get(job_id).progress_step > 0, timeout=WAIT_MS)
    window.close()  # the conftest's quit question answers yes
    job = queue.get(job_id)
    assert job.status == S.PAUSED
    assert 0 < job.progress_step < 150
    statuses = [t.to_status for t in window.deps.queue.timeline(job_id)]
    assert statuses[-2:] == [S.PAUSING, S.PAUSED]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_bundled_model_end_to_end(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, tmp_path: Path
) -> None:
    """Ctrl+Enter -> a real worker runs easel-tiny -> the 64 px image shows."""
    from app.engine.paths import bundled_models_dir

    if not (bundled_models_dir() / "easel-tiny" / "model_index.json").is_file():
        pytest.skip("the bundled model is not built")
    config = replace(worker_config(queue, tmp_path), runner_factory=default_runner)
    sup = Supervisor(queue, config, FAST_SETTINGS, policy=FAST_POLICY, workers=1)
    try:
        window = make_window(pool=sup)
        sup.start()
        job_id = type_and_generate(qtbot, window, "a red circle on a blue background")
        qtbot.waitUntil(lambda: status_of(window, job_id) is S.SUCCESS, timeout=150_000)
        qtbot.waitUntil(lambda: window.image.path is not None, timeout=WAIT_MS)
        image = window.image.canvas.image
        assert image is not None and (image.width(), image.height()) == (64, 64)
    finally:
        sup.shutdown(timeout=5.0)
