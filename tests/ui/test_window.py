"""The window end to end with a real SQLite queue and fake workers driven by its timers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QAbstractItemView, QSplitter
from pytestqt.qtbot import QtBot

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.outputs.image import write_png
from app.engine.settings import load_settings, save_settings
from app.engine.workers.messages import WorkerMessage
from app.ui.presenters.actions import Action
from app.ui.presenters.rows import JobRow, ListFilter
from app.ui.widgets.settings_dialog import SettingsDialog
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import WORKER, FakeWorkers
from tests.ui.helpers import banner_button, job_in

# A hang must fail fast, not stall the whole suite (the suite-wide limit is 10 min).
pytestmark = pytest.mark.timeout(60)

S = JobStatus
TIMEOUT_MS = 5000


def shown_job(window: MainWindow, job_id: int) -> JobRow:
    row = window.vm.jobs.job(job_id)
    assert row is not None, f"job {job_id} is not in the list"
    return row


def scrolled_to_bottom(table: QAbstractItemView) -> bool:
    table.scrollToBottom()
    return True


def status_of(window: MainWindow, job_id: int) -> JobStatus | None:
    row = window.vm.jobs.job(job_id)
    return None if row is None else row.status


def wait_for(qtbot: QtBot, window: MainWindow, job_id: int, status: JobStatus) -> None:
    qtbot.waitUntil(lambda: status_of(window, job_id) is status, timeout=TIMEOUT_MS)


def type_and_generate(qtbot: QtBot, window: MainWindow, prompt: str) -> int:
    with qtbot.waitActive(window):  # window shortcuts only fire in the active window
        window.activateWindow()
    qtbot.keyClicks(window.prompt.prompt, prompt)
    qtbot.keyClick(window.prompt.prompt, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.vm.jobs.rowCount() > 0, timeout=TIMEOUT_MS)
    return window.vm.jobs.row_at(0).id


def press(qtbot: QtBot, window: MainWindow, action: Action) -> None:
    button = window.jobs.buttons[action]
    qtbot.waitUntil(button.isEnabled, timeout=TIMEOUT_MS)  # buttons follow within a frame
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_ctrl_enter_queues_the_prompt(
    qtbot: QtBot, make_window: Callable[..., MainWindow], workers: FakeWorkers
) -> None:
    workers.claiming = False
    window = make_window()
    job_id = type_and_generate(qtbot, window, "a lighthouse at dusk")
    row = window.vm.jobs.job(job_id)
    assert row is not None and row.prompt == "a lighthouse at dusk"
    assert row.status is S.PENDING and row.params.seed >= 0  # a random seed is fixed at submit
    # The new job is selected, so its timeline shows straight away.
    qtbot.waitUntil(lambda: window.timeline.model.job_id == job_id, timeout=TIMEOUT_MS)


def test_a_job_runs_to_success_and_its_image_shows(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    window = make_window()
    job_id = type_and_generate(qtbot, window, "a red fox")
    wait_for(qtbot, window, job_id, S.SUCCESS)
    qtbot.waitUntil(lambda: window.image.path is not None, timeout=TIMEOUT_MS)
    assert window.image.path is not None and Path(window.image.path).is_file()
    assert window.image.canvas.image is not None
    assert window.notifier.sent[-1][0] == "Image ready"
    qtbot.waitUntil(lambda: window.gallery_model.rowCount() == 1, timeout=TIMEOUT_MS)


def test_a_selected_job_claimed_during_a_refresh_stays_selected_and_its_image_shows(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    workers: FakeWorkers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Flaky under load (test_real_workers): the worker claimed the job between the list's
    # page read and its queued read; the row left the list for one refresh, the selection
    # went with it, and the finished job's image never showed.
    workers.claiming = False
    window = make_window()
    job_id = type_and_generate(qtbot, window, "a red fox")
    qtbot.waitUntil(lambda: window.detail.row is not None and window.detail.row.id == job_id,
                    timeout=TIMEOUT_MS)  # fmt: skip
    service = window.vm.service
    in_order = service.queued_in_order

    def claimed_in_between(limit: int) -> tuple[JobRow, ...]:
        if not workers.steps and (job := workers.queue.claim(WORKER)) is not None:
            assert job.id is not None
            workers.steps[job.id] = 0  # the fake worker runs it from here
        return in_order(limit)

    monkeypatch.setattr(service, "queued_in_order", claimed_in_between)
    window.vm.refresh()
    wait_for(qtbot, window, job_id, S.PROCESSING)
    assert window.detail.row is not None and window.detail.row.id == job_id
    wait_for(qtbot, window, job_id, S.SUCCESS)
    qtbot.waitUntil(lambda: window.image.path is not None, timeout=TIMEOUT_MS)


def test_several_images_at_once_count_the_seed_up(
    qtbot: QtBot, make_window: Callable[..., MainWindow], workers: FakeWorkers
) -> None:
    workers.claiming = False
    window = make_window()
    window.prompt.count.setValue(3)
    window.prompt.seed.setText("100")
    type_and_generate(qtbot, window, "three cats")
    qtbot.waitUntil(lambda: window.vm.jobs.rowCount() == 3, timeout=TIMEOUT_MS)
    assert sorted(r.params.seed for r in window.vm.jobs.rows()) == [100, 101, 102]


def test_cancel_a_running_job(
    qtbot: QtBot, make_window: Callable[..., MainWindow], workers: FakeWorkers
) -> None:
    workers.steps_per_poll = 0  # hold it mid-run
    window = make_window()
    job_id = type_and_generate(qtbot, window, "a storm at sea")
    wait_for(qtbot, window, job_id, S.PROCESSING)
    press(qtbot, window, Action.CANCEL)
    wait_for(qtbot, window, job_id, S.CANCELLED)
    qtbot.waitUntil(lambda: len(window.timeline.model.transitions()) == 4, timeout=TIMEOUT_MS)
    path = [t.to_status for t in window.timeline.model.transitions()]
    assert path == [S.PENDING, S.PROCESSING, S.CANCELLING, S.CANCELLED]
    qtbot.waitUntil(window.jobs.buttons[Action.RERUN].isEnabled, timeout=TIMEOUT_MS)
    assert not window.jobs.buttons[Action.CANCEL].isEnabled()


def test_pause_then_resume_runs_to_success(
    qtbot: QtBot, make_window: Callable[..., MainWindow], workers: FakeWorkers
) -> None:
    workers.steps_per_poll = 0
    window = make_window()
    job_id = type_and_generate(qtbot, window, "a mountain lake")
    wait_for(qtbot, window, job_id, S.PROCESSING)
    press(qtbot, window, Action.PAUSE)
    wait_for(qtbot, window, job_id, S.PAUSED)
    qtbot.waitUntil(window.jobs.buttons[Action.RESUME].isEnabled, timeout=TIMEOUT_MS)
    assert not window.jobs.buttons[Action.PAUSE].isEnabled()
    workers.steps_per_poll = 10
    press(qtbot, window, Action.RESUME)
    wait_for(qtbot, window, job_id, S.SUCCESS)
    qtbot.waitUntil(lambda: window.image.path is not None, timeout=TIMEOUT_MS)


def test_retry_and_rerun(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.claiming = False
    failed = job_in(queue, S.FAILED, "a failed one")
    window = make_window()
    qtbot.waitUntil(lambda: status_of(window, failed) is S.FAILED, timeout=TIMEOUT_MS)
    window.jobs.select_jobs([failed])
    press(qtbot, window, Action.RETRY)
    wait_for(qtbot, window, failed, S.PENDING)
    assert shown_job(window, failed).attempt == 2
    queue.cancel(failed)
    wait_for(qtbot, window, failed, S.CANCELLED)
    press(qtbot, window, Action.RERUN)
    qtbot.waitUntil(lambda: window.vm.jobs.rowCount() == 2, timeout=TIMEOUT_MS)
    assert window.vm.jobs.row_at(0).rerun_of == failed


def shown_order(window: MainWindow) -> list[int]:
    return [row.id for row in window.vm.jobs.rows()]


def test_queued_jobs_show_in_run_order_and_a_move_moves_the_row(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    """Issue 28.3: the list stayed newest first, so a reorder moved nothing on screen."""
    workers.claiming = False
    done = job_in(queue, S.SUCCESS)
    a, b, c = (job_in(queue, S.PENDING) for _ in range(3))
    window = make_window()
    qtbot.waitUntil(lambda: shown_order(window) == [a, b, c, done], timeout=TIMEOUT_MS)
    window.jobs.select_jobs([c])
    window.jobs.table.setFocus()
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Up, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: shown_order(window) == [a, c, b, done], timeout=TIMEOUT_MS)
    assert [r.id for r in window.jobs.selected_rows()] == [c]  # the selection moved with it
    up = window.jobs.buttons[Action.UP]
    qtbot.mouseClick(up, Qt.MouseButton.LeftButton)  # a real click on ↑
    qtbot.waitUntil(lambda: shown_order(window) == [c, a, b, done], timeout=TIMEOUT_MS)
    claimed = queue.claim("test-worker")
    # No worker holds a model: the claim takes the queue's order, what the list shows.
    assert claimed is not None and claimed.id == c
    window.jobs.select_jobs([a])
    window.jobs.table.setFocus()  # the click left it on the button
    qtbot.waitUntil(window.jobs.table.hasFocus, timeout=TIMEOUT_MS)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Down, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: shown_order(window)[:3] == [b, a, c], timeout=TIMEOUT_MS)
    row = window.vm.jobs.job(b)
    assert row is not None and row.queue_position == 1


def test_filters_show_only_their_statuses(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.claiming = False
    done, failed, paused, cancelled = (
        job_in(queue, s) for s in (S.SUCCESS, S.FAILED, S.PAUSED, S.CANCELLED)
    )
    window = make_window()
    # A cancelled job is not "Done" (issue 28.7): it made no image.
    expected = {ListFilter.ALL: {done, failed, paused, cancelled}, ListFilter.ACTIVE: {paused},
                ListFilter.DONE: {done}, ListFilter.FAILED: {failed}}  # fmt: skip
    for name, wanted in expected.items():
        window.set_filter(name)

        def shown(w: set[int] = wanted) -> bool:
            return {r.id for r in window.vm.jobs.rows()} == w

        qtbot.waitUntil(shown, timeout=TIMEOUT_MS)
    assert "1" in next(b.text() for b in window.jobs.filters.buttons() if "Failed" in b.text())


def test_a_refused_request_is_a_readable_message(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.claiming = False
    done = job_in(queue, S.SUCCESS)
    window = make_window()
    window.vm.request(JobEvent.PAUSE, [done])
    qtbot.waitUntil(window.error_banner.isVisible, timeout=TIMEOUT_MS)
    text = window.error_banner.label.text()
    assert f"job {done}" in text and "SUCCESS" in text and "Traceback" not in text


def test_empty_prompt_is_refused_without_a_job(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    window = make_window()
    window.generate()
    assert window.error_banner.isVisible()
    assert "prompt" in window.error_banner.label.text().lower()


def test_orphaned_job_shows_the_restore_banner(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    from app.ui.presenters.interfaces import RestoreSummary
    from app.ui.wiring import recover_at_launch

    workers.claiming = False
    from app.engine.workers.liveness import this_host

    # A worker of this machine whose process is gone (nobody holds its liveness lock).
    job_id = job_in(queue, S.PROCESSING, worker=f"{this_host()}:999999:deadbeef0000")
    queue_job = queue.get(job_id)
    assert queue_job.status == S.PROCESSING
    settings = load_settings()
    restore = recover_at_launch(queue, settings)
    assert isinstance(restore, RestoreSummary) and restore.job_ids == (job_id,), restore
    window = make_window(restore=restore)
    assert window.restore_banner.isVisible()
    assert "1 requeued" in window.restore_banner.label.text()
    show = banner_button(qtbot, window.restore_banner, "Show")
    qtbot.mouseClick(show, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: [r.id for r in window.jobs.selected_rows()] == [job_id],
                    timeout=TIMEOUT_MS)  # fmt: skip


def test_a_recovered_job_shows_its_saved_step_on_the_row_and_in_the_timeline(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    """Issue 28.3: a job requeued by crash recovery said "queued · 10 steps" although it
    continues from its rolling checkpoint; the row and the timeline now say from which step."""
    from app.engine import paths
    from app.engine.generation.loop.checkpoint_files import Claim
    from app.engine.workers.liveness import this_host
    from app.ui.itemmodels.delegates import progress_text
    from app.ui.itemmodels.timeline_model import TCol
    from app.ui.presenters.interfaces import RestoreSummary
    from app.ui.wiring import recover_at_launch
    from tests.engine.workers.test_recovery import _checkpoint_bytes

    workers.claiming = False
    dead = f"{this_host()}:999999:deadbeef0000"
    job_id = job_in(queue, S.PROCESSING, worker=dead)
    job = queue.get(job_id)
    Claim(paths.checkpoints_dir(), job_id, job.attempt, job.version).file.write_bytes(
        _checkpoint_bytes(steps_done=4)
    )
    queue.report_progress(job_id, dead, 6, 10)  # the step reached after that checkpoint
    restore = recover_at_launch(queue, load_settings())
    assert isinstance(restore, RestoreSummary) and restore.job_ids == (job_id,), restore
    window = make_window(restore=restore)
    show = banner_button(qtbot, window.restore_banner, "Show")
    qtbot.mouseClick(show, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.timeline.model.job_id == job_id, timeout=TIMEOUT_MS)
    row = shown_job(window, job_id)
    text = progress_text(row, row.progress_step, row.progress_total, None)  # what the list paints
    assert text.endswith("will continue from step 4/10"), text
    model = window.timeline.model
    last = model.index(model.rowCount() - 1, 0)
    words = [model.index(i, TCol.WHAT, last).data() for i in range(model.rowCount(last))]
    assert "Trying again automatically; will continue from step 4" in words, words


def test_retry_by_hand_also_says_from_which_step_it_continues(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, workers: FakeWorkers
) -> None:
    from app.engine import paths
    from app.engine.generation.loop.checkpoint_files import Claim
    from app.ui.itemmodels.delegates import progress_text
    from tests.engine.workers.test_recovery import _checkpoint_bytes

    workers.claiming = False
    job_id = job_in(queue, S.TIMEOUT)
    queue.mark_given_up(job_id, "for the test", version=queue.get(job_id).version)
    job = queue.get(job_id)
    Claim(paths.checkpoints_dir(), job_id, job.attempt, job.version - 1).file.write_bytes(
        _checkpoint_bytes(steps_done=3)
    )
    qtbot.waitUntil(lambda: window.vm.jobs.job(job_id) is not None, timeout=TIMEOUT_MS)
    window.jobs.select_jobs([job_id])
    press(qtbot, window, Action.RETRY)
    wait_for(qtbot, window, job_id, S.PENDING)
    row = shown_job(window, job_id)
    assert progress_text(row, row.progress_step, row.progress_total, None).endswith(
        "will continue from step 3/10"
    )


def test_resume_paused_from_the_restore_banner(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    from app.ui.presenters.interfaces import RestoreSummary

    workers.claiming = False
    paused = job_in(queue, S.PAUSED)
    window = make_window(restore=RestoreSummary(paused=(paused,)))
    assert "1 paused" in window.restore_banner.label.text()
    resume = banner_button(qtbot, window.restore_banner, "Resume all")
    qtbot.mouseClick(resume, Qt.MouseButton.LeftButton)
    wait_for(qtbot, window, paused, S.PENDING)
    assert not window.restore_banner.isVisible()


def test_quit_with_running_jobs_asks_then_shuts_the_workers_down(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    workers: FakeWorkers,
    quit_answers: list[int],
) -> None:
    """What the window does on quit: ask with the running count, then hand over to the pool.

    The pausing itself is the worker pool's job; with real worker processes it is checked by
    tests/ui/test_real_workers.py::test_quit_pauses_a_running_job_at_its_step.
    """
    workers.steps_per_poll = 0
    window = make_window()
    job_id = type_and_generate(qtbot, window, "a night market")
    wait_for(qtbot, window, job_id, S.PROCESSING)
    window.close()
    assert quit_answers == [1]
    assert workers.shutdown_timeout == 1.0  # Dependencies.shutdown_timeout_s from conftest
    assert not window.isVisible()


def test_quit_can_be_called_off(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.steps_per_poll = 0
    asked: list[int] = []

    def refuse(n: int) -> bool:
        asked.append(n)
        return False

    window = make_window(confirm=refuse)
    job_id = type_and_generate(qtbot, window, "a night market")
    wait_for(qtbot, window, job_id, S.PROCESSING)
    window.close()
    assert asked == [1] and window.isVisible() and workers.shutdown_timeout is None


def test_dropping_a_png_without_settings_starts_from_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    from PIL import Image

    png = tmp_path / "plain.png"
    Image.new("RGB", (64, 64)).save(png)
    window = make_window()
    before = window.prompt.params()
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(png))])
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                      Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    window.prompt.dropEvent(drop)
    # no settings to reuse: it becomes the init image (issue 13.1), the settings stay
    qtbot.waitUntil(lambda: window.prompt.init is not None, timeout=TIMEOUT_MS)
    assert not window.error_banner.isVisible()
    before = replace(before, width=64, height=64, strength=0.75)
    assert window.prompt.params() == before  # the form is untouched


def test_dropping_an_easel_png_fills_the_form(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    from PIL import Image

    params = GenerationParams(prompt="a paper boat", negative_prompt="text", model="other-model",
                              scheduler="Euler a", steps=33, cfg=8.5, width=256, height=512,
                              seed=4242)  # fmt: skip
    png = tmp_path / "boat.png"
    write_png(Image.new("RGB", (8, 8)), png, params)
    window = make_window()
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(png))])
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                      Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    # Qt delivers a Drop only inside a real drag; call the handler as Qt would.
    window.prompt.dropEvent(drop)
    assert drop.isAccepted()
    # read on the window's image thread (a PNG from anyone never runs on the GUI thread)
    qtbot.waitUntil(lambda: window.prompt.params() == params, timeout=TIMEOUT_MS)
    assert window.prompt.size_preset.currentText() == "Custom"


def test_reuse_settings_of_a_finished_job(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.claiming = False
    done = job_in(queue, S.SUCCESS, "a lighthouse, seed kept")
    window = make_window()
    qtbot.waitUntil(lambda: status_of(window, done) is S.SUCCESS, timeout=TIMEOUT_MS)
    window.jobs.select_jobs([done])
    qtbot.mouseClick(window.image.reuse, Qt.MouseButton.LeftButton)
    params = window.prompt.params()
    assert params.prompt == "a lighthouse, seed kept"
    assert params.seed == queue.get(done).seed and params.steps == 10


def test_settings_are_saved(qtbot: QtBot) -> None:
    dialog = SettingsDialog(load_settings(), save_settings)
    qtbot.addWidget(dialog)
    dialog.workers.setValue(3)
    dialog.max_attempts.setValue(5)
    dialog.accept()
    assert (load_settings().workers, load_settings().max_attempts) == (3, 5)


def test_window_geometry_is_remembered(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    window = make_window()
    # The offscreen screen is 800 px wide, so Qt clamps the width; the height and the
    # jobs/timeline split come back exactly.
    window.resize(window.width(), 711)
    right = window.jobs.parentWidget()
    assert isinstance(right, QSplitter)
    right.setSizes([200, 300])
    sizes = right.sizes()
    window.close()
    again = make_window()
    assert again.height() == 711
    again_right = again.jobs.parentWidget()
    assert isinstance(again_right, QSplitter) and again_right.sizes() == sizes


class BrokenPool:
    def start(self) -> None:
        pass

    def poll(self) -> list[WorkerMessage]:
        raise BrokenPipeError("worker pipe closed")

    def own_running_ids(self) -> list[int]:
        return []

    def shutdown(self, timeout: float) -> list[int]:
        return []


def test_a_broken_worker_pool_is_a_message_not_a_crash(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    window = make_window(pool=BrokenPool())
    qtbot.waitUntil(window.error_banner.isVisible, timeout=TIMEOUT_MS)
    assert "Lost contact with the workers" in window.error_banner.label.text()


def test_a_failed_job_is_announced(
    qtbot: QtBot, make_window: Callable[..., MainWindow], workers: FakeWorkers
) -> None:
    workers.steps_per_poll = 0
    window = make_window()
    job_id = type_and_generate(qtbot, window, "a doomed job")
    wait_for(qtbot, window, job_id, S.PROCESSING)
    workers.fail(job_id, "CUDA out of memory")
    wait_for(qtbot, window, job_id, S.FAILED)
    title, text = window.notifier.sent[-1]
    assert title == f"Job {job_id} failed" and "CUDA out of memory" in text
    # The selected job's image area follows it from "running" to its error.
    qtbot.waitUntil(
        lambda: "CUDA out of memory" in window.image.canvas.placeholder, timeout=TIMEOUT_MS
    )


def test_worker_status_counts_ready_workers(qtbot: QtBot) -> None:
    from app.engine.workers.messages import MessageKind, WorkerMessage
    from app.ui.qt.worker_feed import WorkerStatus

    status = WorkerStatus()
    qtbot.addWidget(status)
    status.starting()
    assert "starting" in status.text()
    for worker in ("w1", "w2"):
        status.handle(WorkerMessage(MessageKind.READY, worker))
    assert status.text() == "2 workers ready"
    # Busy workers are not "ready" (issue 28.3): it said "2 workers ready" while both ran jobs.
    status.handle(WorkerMessage(MessageKind.STARTED, "w1", job_id=1))
    assert status.text() == "1 busy, 1 ready"
    status.handle(WorkerMessage(MessageKind.STARTED, "w2", job_id=2))
    assert status.text() == "2 workers busy"
    status.handle(WorkerMessage(MessageKind.FINISHED, "w2", job_id=2))
    assert status.text() == "1 busy, 1 ready"
    status.handle(WorkerMessage(MessageKind.EXITING, "w1"))
    assert status.text() == "1 worker ready"


def test_an_old_job_on_screen_stays_fresh(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    """Below the first page only rows on screen are re-read: they must still update."""
    workers.claiming = False
    old = job_in(queue, S.PAUSED, "an old paused job")
    for i in range(70):
        queue.submit(GenerationParams(prompt=f"newer job {i}"))
    window = make_window()
    qtbot.waitUntil(lambda: window.vm.jobs.rowCount() >= 60, timeout=TIMEOUT_MS)
    table = window.jobs.table
    qtbot.waitUntil(
        lambda: scrolled_to_bottom(table) and window.vm.jobs.row_of(old) is not None,
        timeout=TIMEOUT_MS,
    )
    table.scrollToBottom()
    queue.resume(old)  # another process moves it
    qtbot.waitUntil(lambda: status_of(window, old) is S.PENDING, timeout=TIMEOUT_MS)


def test_the_quit_question_counts_jobs() -> None:
    from app.ui.widgets.quit_dialog import quit_question

    assert quit_question(1) == (
        "Pause 1 running job and quit? It will continue from where it stopped next time."
    )
    assert quit_question(3).startswith("Pause 3 running jobs and quit?")


def test_garbage_is_collected_on_the_gui_thread_only(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    import gc

    from app.ui.qt.gc_guard import collect_on_gui_thread

    make_window()
    assert not gc.isenabled()  # background threads never run the collector
    collector = collect_on_gui_thread()
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        collector.check()  # what the GUI-thread timer does
        assert gc.get_count()[0] <= 1
    finally:
        gc.set_threshold(*thresholds)


def test_a_paused_job_shows_its_last_preview(
    qtbot: QtBot, make_window: Callable[..., MainWindow], workers: FakeWorkers
) -> None:
    workers.steps_per_poll = 1
    window = make_window()
    window.prompt.steps.setValue(150)
    job_id = type_and_generate(qtbot, window, "a slow sunrise")
    qtbot.waitUntil(lambda: window.vm.live.last_preview(job_id) is not None, timeout=TIMEOUT_MS)
    press(qtbot, window, Action.PAUSE)
    wait_for(qtbot, window, job_id, S.PAUSED)
    window.jobs.select_jobs([job_id])
    qtbot.waitUntil(lambda: "last preview" in window.image.caption.text(), timeout=TIMEOUT_MS)
    assert window.image.canvas.image is not None
    assert window.image.caption.text().startswith(f"Job {job_id} is paused at step")


def test_banners_float_over_the_panels_without_moving_them(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    window = make_window()
    qtbot.waitExposed(window)
    before = window.splitter.geometry()
    window.show_error("The disk is full: 0 bytes left on /data")
    qtbot.waitUntil(window.error_banner.isVisible, timeout=TIMEOUT_MS)
    window.undo_banner.show_text("2 jobs will be cancelled in 6 s")
    assert window.splitter.geometry() == before  # nothing below moved
    stack = window.banners
    assert stack.height() >= window.error_banner.height() + window.undo_banner.height()
    top = stack.mapTo(window, stack.rect().topLeft())
    hit = window.childAt(top.x() + 20, top.y() + 10)
    assert hit is not None and stack.isAncestorOf(hit)  # on top of the panels
    window.error_banner.hide()
    window.undo_banner.hide()
    assert stack.height() == 0 and window.splitter.geometry() == before


def test_an_image_that_will_not_open_is_an_error_in_the_banner(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    window = make_window()
    job_id = type_and_generate(qtbot, window, "a red fox")
    wait_for(qtbot, window, job_id, S.SUCCESS)
    qtbot.waitUntil(lambda: window.image.path is not None, timeout=TIMEOUT_MS)
    path = Path(shown_job(window, job_id).output_path or "")
    path.write_bytes(b"not a png")
    window.jobs.select_jobs([])
    window.jobs.select_jobs([job_id])
    qtbot.waitUntil(window.error_banner.isVisible, timeout=TIMEOUT_MS)
    assert str(path) in window.error_banner.label.text()
    assert window.image.canvas.image is None


def test_a_long_error_wraps_inside_its_banner(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    window = make_window()
    qtbot.waitExposed(window)
    window.show_error("Not queued: " + "Steps must be between 1 and 150, not 999; " * 4)
    label = window.error_banner.label
    qtbot.waitUntil(lambda: label.height() >= label.heightForWidth(label.width()) > 0,
                    timeout=TIMEOUT_MS)  # fmt: skip
    assert window.banners.height() >= label.height()
