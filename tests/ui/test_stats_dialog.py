"""The stats panel draws the numbers it is given: one bar per status, p50 and p95 per group."""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
from pytestqt.qtbot import QtBot

from app.engine.history.stats import history_stats
from app.engine.params import GenerationParams
from app.engine.queue import JobQueue
from app.engine.states import JobEvent
from app.models.db import open_database
from app.ui.widgets.stats_dialog import StatsDialog


def bar_heights(plot: pg.PlotWidget) -> list[list[float]]:
    bars = [item for item in plot.getPlotItem().items if isinstance(item, pg.BarGraphItem)]
    return [list(bar.opts["height"]) for bar in bars]


def test_the_panel_shows_the_history_of_the_period(qtbot: QtBot, tmp_path: Path) -> None:
    clock = [100.0]
    queue = JobQueue(open_database(tmp_path / "easel.db"), clock=lambda: clock[0])
    for run_s in (4.0, 8.0):
        job_id = queue.submit(GenerationParams("a cat", width=64, height=64))
        queue.claim("host:1:t")
        clock[0] += run_s
        queue.fire(job_id, JobEvent.COMPLETE, source="test")
    queue.cancel(queue.submit(GenerationParams("a dog")))
    stats = history_stats(queue, 0, 1000).as_dict()
    queue.db.dispose()

    dialog = StatsDialog(stats)
    qtbot.addWidget(dialog)
    assert list(stats["per_status"]) == ["CANCELLED", "SUCCESS"]
    assert bar_heights(dialog.status_plot) == [[1, 2]]
    assert bar_heights(dialog.run_plot) == [[4.0], [8.0]]  # p50 and p95 of easel-tiny 64x64
