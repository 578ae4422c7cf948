"""View > Workers: two real worker processes ("machines") listed; Stop reaches the busy one.

Scripted runner (no torch); real SQLite file, real clicks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMenu
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.workers.liveness import WorkerIdentity
from app.engine.workers.supervisor import Supervisor
from app.ui.widgets.window import MainWindow
from app.ui.widgets.workers_panel import WorkersPanel
from tests.engine.workers.worker_fixtures import (
    FAST_POLICY,
    FAST_SETTINGS,
    fake_params,
    worker_config,
)

pytestmark = pytest.mark.timeout(90)

WAIT_MS = 30_000  # spawned workers on a busy machine; a passing test never waits this long
MACHINES = ("studio-a", "studio-b")


@pytest.fixture
def machines(queue: JobQueue, tmp_path: Path) -> Iterator[list[Supervisor]]:
    supervisors = []
    for name in MACHINES:
        config = replace(worker_config(queue, tmp_path / name), name=name, presence_interval_s=0.2)
        supervisor = Supervisor(queue, config, FAST_SETTINGS, policy=FAST_POLICY, workers=1,
                                maintenance_interval_s=0.2)  # fmt: skip
        supervisors.append(supervisor)
    yield supervisors
    for supervisor in supervisors:
        supervisor.shutdown(timeout=5.0)


def open_panel(window: MainWindow) -> WorkersPanel:
    view = next(m for m in window.menuBar().actions() if m.text() == "&View").menu()
    assert isinstance(view, QMenu)
    [workers] = [a for a in view.actions() if a.text() == "&Workers…"]
    workers.trigger()
    assert window.dialogs.workers_panel is not None
    return window.dialogs.workers_panel


def text_at(panel: WorkersPanel, row: int, column: int) -> str:
    item = panel.table.item(row, column)
    return item.text() if item is not None else ""


def cells(panel: WorkersPanel, machine: str) -> list[str]:
    for row in range(panel.table.rowCount()):
        texts = [text_at(panel, row, col) for col in range(panel.table.columnCount())]
        if texts[0] == machine:
            return texts
    return []


def click_row(qtbot: QtBot, panel: WorkersPanel, machine: str) -> None:
    row = next(r for r in range(panel.table.rowCount()) if text_at(panel, r, 0) == machine)
    item = panel.table.item(row, 0)
    assert item is not None
    rect = panel.table.visualItemRect(item)
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def test_the_panel_lists_both_machines_and_stop_pauses_the_busy_ones_job(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    machines: list[Supervisor],
    queue: JobQueue,
) -> None:
    window = make_window(pool=machines[0])
    for supervisor in machines:
        supervisor.start()
    panel = open_panel(window)
    qtbot.waitUntil(lambda: all(cells(panel, m)[6:] == ["Idle"] for m in MACHINES), timeout=WAIT_MS)
    headers = [panel.table.model().headerData(c, Qt.Orientation.Horizontal) for c in range(7)]
    assert headers == [
        "Machine", "Device", "Model loaded", "Current job", "Last heartbeat", "Jobs done", "State"
    ]  # fmt: skip
    assert cells(panel, "studio-a")[4].endswith("s ago")

    job_id = queue.submit(fake_params("step=0.1", steps=150))
    qtbot.waitUntil(lambda: queue.get(job_id).status == JobStatus.PROCESSING, timeout=WAIT_MS)
    identity = WorkerIdentity.parse(queue.get(job_id).worker_id)
    assert identity is not None
    busy = identity.host
    idle = next(m for m in MACHINES if m != busy)
    qtbot.waitUntil(lambda: cells(panel, busy)[3] == f"#{job_id}", timeout=WAIT_MS)

    click_row(qtbot, panel, busy)
    assert panel.stop.isEnabled()
    qtbot.mouseClick(panel.stop, Qt.MouseButton.LeftButton)

    qtbot.waitUntil(lambda: queue.get(job_id).status == JobStatus.PAUSED, timeout=WAIT_MS)
    pause = next(t for t in queue.timeline(job_id) if t.event == JobEvent.PAUSE)
    assert pause.message == "stop requested from the Workers panel"
    qtbot.waitUntil(lambda: cells(panel, busy)[6] == "Exited", timeout=WAIT_MS)
    assert cells(panel, idle)[6] == "Idle"  # the other machine was not asked anything
    click_row(qtbot, panel, busy)
    assert not panel.stop.isEnabled() and not panel.drain.isEnabled()
