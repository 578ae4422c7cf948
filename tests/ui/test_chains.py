"""Jobs that build on jobs, from the window (issue 13.1, 13.3): real clicks and keys, a real
SQLite queue; the engine's graph decides BLOCKED and UNBLOCK."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QGuiApplication, QImage
from PySide6.QtWidgets import QMenu
from pytestqt.qtbot import QtBot

from app.engine.jobs.graph import parents_of
from app.engine.jobs.params import INIT_UPLOADED
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.models.tables import Job
from app.ui.itemmodels.job_list_model import DETAIL_ROLE
from app.ui.presenters.actions import Action
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import FakeWorkers
from tests.ui.helpers import job_in
from tests.ui.test_keyboard import finished_job, list_with

pytestmark = pytest.mark.timeout(60)

S = JobStatus
TIMEOUT_MS = 5000
CTRL = Qt.KeyboardModifier.ControlModifier


def children(queue: JobQueue, parent: int) -> list[Job]:
    return [job for job in queue.jobs() if parent in parents_of(queue, job.id or 0)]


def wait_children(qtbot: QtBot, queue: JobQueue, parent: int, n: int) -> list[Job]:
    qtbot.waitUntil(lambda: len(children(queue, parent)) == n, timeout=TIMEOUT_MS)
    return children(queue, parent)


def row_text(window: MainWindow, job_id: int, role: int) -> str:
    row = window.vm.jobs.row_of(job_id)
    assert row is not None
    return str(window.vm.jobs.index(row, 0).data(role) or "")


def drop(window: MainWindow, path: Path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    window.prompt.dropEvent(event)  # Qt delivers a Drop only inside a real drag
    assert event.isAccepted()


def test_upscale_from_the_job_menu_queues_a_child_after_its_parent(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    parent = finished_job(queue, tmp_path / "done.png")
    list_with(qtbot, window, parent)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    menu = window.jobs.menu
    assert isinstance(menu, QMenu)
    qtbot.waitUntil(menu.isVisible, timeout=TIMEOUT_MS)
    while menu.activeAction().text() != Action.UPSCALE.label:
        qtbot.keyClick(menu, Qt.Key.Key_Down)
    qtbot.keyClick(menu, Qt.Key.Key_Return)
    [child] = wait_children(qtbot, queue, parent, 1)
    assert child.init_image == f"job:{parent}" and (child.width, child.height) == (128, 128)
    # Its parent had already succeeded: the UNBLOCK follows the child's own commit at once
    # (the list may read the child in between, still BLOCKED).
    qtbot.waitUntil(lambda: queue.get(child.id or 0).status == S.PENDING, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: window.vm.jobs.row_of(child.id or 0) is not None, timeout=TIMEOUT_MS)
    assert f"after #{parent}" in row_text(window, child.id or 0, DETAIL_ROLE)


def test_generate_and_upscale_queues_the_child_blocked_at_once(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, workers: FakeWorkers
) -> None:
    qtbot.keyClicks(window.prompt.prompt, "a lighthouse")
    qtbot.mouseClick(window.prompt.generate_upscale, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(queue.jobs()) == 2, timeout=TIMEOUT_MS)
    child, parent = queue.jobs()  # newest first
    assert parent.status == S.PENDING and child.status == S.BLOCKED
    assert parents_of(queue, child.id or 0) == [parent.id]
    workers.claiming = True  # the parent runs, fails: the child waits and says why
    qtbot.waitUntil(lambda: queue.get(parent.id or 0).status == S.PROCESSING, timeout=TIMEOUT_MS)
    workers.fail(parent.id or 0, "out of memory")
    qtbot.waitUntil(
        lambda: "which failed: out of memory" in row_text(window, child.id or 0, DETAIL_ROLE),
        timeout=TIMEOUT_MS,
    )
    tooltip = row_text(window, child.id or 0, int(Qt.ItemDataRole.ToolTipRole))
    assert f"waiting for #{parent.id}" in tooltip
    window.jobs.select_jobs([child.id or 0])
    qtbot.waitUntil(lambda: "which failed" in window.image.canvas.placeholder, timeout=TIMEOUT_MS)
    queue.retry(parent.id or 0)  # retrying the parent carries the chain on
    qtbot.waitUntil(lambda: queue.get(child.id or 0).status == S.SUCCESS, timeout=TIMEOUT_MS)
    path = [t.event for t in queue.timeline(child.id or 0)]
    assert path[:2] == [JobEvent.SUBMIT_AFTER, JobEvent.UNBLOCK]


def test_variations_from_the_image_panel_ask_how_many(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    parent = finished_job(queue, tmp_path / "done.png")
    list_with(qtbot, window, parent)
    button = window.image.follow_ups[Action.VARY]
    qtbot.waitUntil(button.isEnabled, timeout=TIMEOUT_MS)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    dialog = window.follow_ups.variations_dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible, timeout=TIMEOUT_MS)
    spin = dialog.focusWidget()
    assert spin is not None
    qtbot.keyClick(spin, Qt.Key.Key_A, CTRL)
    qtbot.keyClicks(spin, "3")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    kids = wait_children(qtbot, queue, parent, 3)
    assert {job.init_image for job in kids} == {f"job:{parent}"}
    assert all(job.strength == pytest.approx(0.5) for job in kids)  # the window's default


def test_variations_take_a_strength_and_the_row_explains_its_step_count(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    """Issue 28.5: four near-identical variations; the row said 6 steps, its tooltip 20."""
    parent = finished_job(queue, tmp_path / "done.png")
    list_with(qtbot, window, parent)
    button = window.image.follow_ups[Action.VARY]
    qtbot.waitUntil(button.isEnabled, timeout=TIMEOUT_MS)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    dialog = window.follow_ups.variations_dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible, timeout=TIMEOUT_MS)
    qtbot.keyClick(dialog.focusWidget(), Qt.Key.Key_Tab)  # to the strength
    strength = dialog.focusWidget()
    assert strength is dialog.strength
    qtbot.keyClick(strength, Qt.Key.Key_A, CTRL)
    qtbot.keyClicks(strength, "0.8")
    qtbot.keyClick(strength, Qt.Key.Key_Return)
    kids = wait_children(qtbot, queue, parent, 4)
    assert all(job.strength == pytest.approx(0.8) for job in kids)
    child = kids[0]
    qtbot.waitUntil(lambda: window.vm.jobs.row_of(child.id or 0) is not None, timeout=TIMEOUT_MS)
    tooltip = row_text(window, child.id or 0, int(Qt.ItemDataRole.ToolTipRole))
    assert "From an image at strength 0.8: 8 of its 10 steps run" in tooltip


def test_use_as_init_image_sets_only_the_image_and_generate_sends_it(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    parent = finished_job(queue, tmp_path / "done.png")
    window.prompt.prompt.setPlainText("my own words")
    window.prompt.seed.setText("")  # random: the job's fixed seed must not come along
    list_with(qtbot, window, parent)
    button = window.image.follow_ups[Action.USE_AS_INIT]
    qtbot.waitUntil(button.isEnabled, timeout=TIMEOUT_MS)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.prompt.init is not None, timeout=TIMEOUT_MS)
    assert window.prompt.strength.isVisible()
    # Issue 28.4: the init image and its size, not the job's prompt and seed.
    assert window.prompt.prompt.toPlainText() == "my own words"
    assert window.prompt.seed.text() == "" and window.prompt.random_seed.isChecked()
    assert (window.prompt.width_box.text(), window.prompt.height_box.text()) == ("64", "48")
    window.prompt.strength.selectAll()
    qtbot.keyClicks(window.prompt.strength, "0.5")
    qtbot.keyClick(window.prompt.prompt, Qt.Key.Key_Return, CTRL)
    qtbot.waitUntil(lambda: len(queue.jobs()) == 2, timeout=TIMEOUT_MS)
    job = queue.jobs()[0]
    assert job.init_image.startswith(INIT_UPLOADED) and job.strength == 0.5
    assert parents_of(queue, job.id or 0) == []  # the image is stored with it, not a link


def test_dropping_a_plain_image_makes_it_the_init_image(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    picture = tmp_path / "sketch.jpg"
    Image.new("RGB", (60, 40), "green").save(picture)
    drop(window, picture)
    qtbot.waitUntil(lambda: window.prompt.init is not None, timeout=TIMEOUT_MS)
    assert "sketch.jpg" in window.prompt.init_caption.text()
    window.prompt.init_clear.click()
    assert window.prompt.init is None and not window.prompt.strength.isVisible()


def test_a_dropped_file_that_is_no_image_is_an_error_in_the_banner(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    fake = tmp_path / "notes.png"
    fake.write_text("not a picture")
    before = window.prompt.params()
    drop(window, fake)
    qtbot.waitUntil(window.error_banner.isVisible, timeout=TIMEOUT_MS)
    assert "notes.png" in window.error_banner.label.text()
    assert window.prompt.init is None and window.prompt.params() == before


def test_pasting_an_image_into_the_prompt_makes_it_the_init_image(
    qtbot: QtBot, window: MainWindow
) -> None:
    image = QImage(48, 32, QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.blue)
    QGuiApplication.clipboard().setImage(image)
    window.prompt.prompt.setFocus()
    qtbot.keyClick(window.prompt.prompt, Qt.Key.Key_V, CTRL)
    qtbot.waitUntil(lambda: window.prompt.init is not None, timeout=TIMEOUT_MS)
    assert window.prompt.prompt.toPlainText() == ""  # the image did not go into the text
    init = window.prompt.init
    assert init is not None and (init.width, init.height) == (48, 32)


def test_a_blocked_job_offers_no_init_image_but_can_be_upscaled(queue: JobQueue) -> None:
    from app.ui.presenters.actions import applies
    from app.ui.presenters.queue_service import QueueService

    blocked = job_in(queue, S.BLOCKED)
    row = QueueService(queue).job(blocked)
    assert row is not None and row.waiting.startswith("waiting for #")
    assert applies(Action.UPSCALE, row) and not applies(Action.USE_AS_INIT, row)
