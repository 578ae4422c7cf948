"""The Groups menu (issue 27): the X/Y/Z plot builder queues cells and a grid job; a group
reads as one in the list; pause, cancel and retry act on every member of the group."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QDialogButtonBox
from pytestqt.qtbot import QtBot

from app.engine.jobs.groups import GroupAction, SeedMode, submit_batch
from app.engine.jobs.params import KIND_GRID, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.ui.itemmodels.job_list_model import DETAIL_ROLE
from app.ui.widgets.groups_menu import GridBuilder
from app.ui.widgets.window import MainWindow

pytestmark = pytest.mark.timeout(60)
TIMEOUT_MS = 5000


def menu_titles(window: MainWindow) -> list[str]:
    return [action.text() for action in window.menuBar().actions()]


def test_the_grid_builder_queues_cells_and_the_grid(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    assert "&Groups" in menu_titles(window)
    window.prompt.set_params(GenerationParams("a red circle", seed=4, steps=6))
    window.groups_menu.open_grid_builder()
    dialog = window.groups_menu.dialog
    assert isinstance(dialog, GridBuilder)
    assert dialog.summary.text() == "6 cell jobs and one grid job"  # steps 4, 8, 12 x cfg 3, 7
    _kind, values = dialog.rows["x"]
    values.setText("4, 999")
    assert "the X axis steps=999: steps must be between 1 and 150" in dialog.summary.text()
    assert not dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).isEnabled()
    values.setText("2, 3")
    dialog.accept()
    qtbot.waitUntil(lambda: len(queue.jobs()) == 5, timeout=TIMEOUT_MS)
    jobs = sorted(queue.jobs(), key=lambda j: j.id or 0)
    assert [j.kind for j in jobs] == ["generate"] * 4 + [KIND_GRID]
    assert [(j.steps, j.cfg, j.seed) for j in jobs[:4]] == [
        (2, 3.0, 4),
        (3, 3.0, 4),
        (2, 7.0, 4),
        (3, 7.0, 4),
    ]
    group = jobs[0].group_id
    qtbot.waitUntil(lambda: window.vm.jobs.row_of(jobs[0].id or 0) is not None, timeout=TIMEOUT_MS)
    row = window.vm.jobs.row_of(jobs[0].id or 0)
    assert row is not None
    assert f"group {group}, cell 1" in str(window.vm.jobs.index(row, 0).data(DETAIL_ROLE))


def test_group_actions_act_on_every_member(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    made = submit_batch(queue, GenerationParams("a cat", seed=1), 3, SeedMode.INCREMENT)
    other = queue.submit(GenerationParams("alone", seed=9))
    window.vm.refresh()
    qtbot.waitUntil(lambda: window.vm.jobs.row_of(made.jobs[1]) is not None, timeout=TIMEOUT_MS)
    window.jobs.select_jobs([made.jobs[1]])
    window.groups_menu.act(GroupAction.PAUSE)
    qtbot.waitUntil(
        lambda: all(queue.get(j).status == JobStatus.PAUSED for j in made.jobs), timeout=TIMEOUT_MS
    )
    assert queue.get(other).status == JobStatus.PENDING  # not in the group
    window.groups_menu.act(GroupAction.CANCEL)
    qtbot.waitUntil(
        lambda: all(queue.get(j).status == JobStatus.CANCELLED for j in made.jobs),
        timeout=TIMEOUT_MS,
    )
    window.jobs.select_jobs([other])
    window.groups_menu.act(GroupAction.RETRY)  # a lone job: said, nothing done
    assert queue.get(other).status == JobStatus.PENDING
