"""The stats panel: what happened to a period's jobs, as charts plus the numbers.

It draws a `Stats.as_dict()` computed elsewhere (off the GUI thread: on the DbThread, as
every store call); it never reads the database itself.
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtWidgets import QDialog, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from app.engine.history.stats import lines_of


class StatsDialog(QDialog):
    def __init__(self, stats: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("statsDialog")
        self.setWindowTitle(self.tr("Statistics"))
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(self.tr("Jobs per status")))
        self.status_plot = bar_chart(stats["per_status"])
        layout.addWidget(self.status_plot)
        layout.addWidget(QLabel(self.tr("Run time per model and size: p50 and p95 (seconds)")))
        runs = stats["run_s"]
        self.run_plot = bar_chart(
            {group: spread["p50"] or 0.0 for group, spread in runs.items()},
            {group: spread["p95"] or 0.0 for group, spread in runs.items()},
        )
        layout.addWidget(self.run_plot)
        numbers = QPlainTextEdit("\n".join(lines_of(stats)))
        numbers.setReadOnly(True)
        layout.addWidget(numbers)
        self.resize(720, 640)


def bar_chart(values: dict[str, float], upper: dict[str, float] | None = None) -> pg.PlotWidget:
    """Bars named along the bottom; `upper` draws a second, thinner bar beside each."""
    plot = pg.PlotWidget()
    plot.setBackground(None)
    names = list(values)
    plot.addItem(pg.BarGraphItem(x=list(range(len(names))), height=list(values.values()),
                                 width=0.4, brush="#5b8def"))  # fmt: skip
    if upper is not None:
        plot.addItem(pg.BarGraphItem(x=[i + 0.4 for i in range(len(names))],
                                     height=[upper[n] for n in names], width=0.25,
                                     brush="#f0a35b"))  # fmt: skip
    plot.getAxis("bottom").setTicks([list(enumerate(names))])
    plot.setMouseEnabled(x=False, y=False)
    return plot
