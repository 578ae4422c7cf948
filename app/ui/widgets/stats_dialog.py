"""View > Statistics: the history in charts for a chosen period (issue 15.6).

Simple painted bars (no chart library: QtCharts is not in PySide6-Essentials and the figures
are a handful of bars). The numbers come from `app.engine.history.stats` on the store thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from app.engine.jobs.states import JobStatus
from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate
from app.ui.presenters.rows import format_duration, status_label
from app.ui.qt.theme import MUTED, status_colour

DAY_S = 86400.0
# (label, days back; None: everything)
PERIODS: tuple[tuple[str, float | None], ...] = (
    (QT_TRANSLATE_NOOP("StatsDialog", "Last 24 hours"), 1),
    (QT_TRANSLATE_NOOP("StatsDialog", "Last 7 days"), 7),
    (QT_TRANSLATE_NOOP("StatsDialog", "Last 30 days"), 30),
    (QT_TRANSLATE_NOOP("StatsDialog", "All time"), None),
)
BAR_HEIGHT = 18
VALUE_W = 110  # room after a bar for its value, "8.1 s (9.7 s)"
BAR_COLOUR = QColor("#8b7cf6")

Bar = tuple[str, float, str]  # label, value, the value as shown
LoadStats = Callable[[float | None, Callable[[dict[str, Any]], None]], None]


class BarChart(QWidget):
    """Horizontal bars with a label on the left and the value at the bar's end."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = title
        self.bars: list[Bar] = []
        self.colours: list[QColor] = []
        self.setMinimumWidth(320)
        self._fit()

    def set_bars(self, bars: Sequence[Bar], colours: Sequence[QColor] = ()) -> None:
        self.bars = list(bars)
        self.colours = list(colours)
        self._fit()
        self.update()

    def _fit(self) -> None:
        self.setMinimumHeight(24 + max(1, len(self.bars)) * (BAR_HEIGHT + 6))

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(self.palette().text().color())
        painter.drawText(QRectF(0, 0, self.width(), 18), Qt.AlignmentFlag.AlignLeft, self.title)
        if not self.bars:
            painter.setPen(QColor(MUTED))
            painter.drawText(QRectF(0, 24, self.width(), BAR_HEIGHT), Qt.AlignmentFlag.AlignLeft,
                             translate("StatsDialog", "nothing in this period"))  # fmt: skip
            return
        # The values as wide as the widest needs ("1:48 min (3:02 min)" was cut off).
        value_w = max([VALUE_W, *(painter.fontMetrics().horizontalAdvance(t) + 8
                                   for _l, _v, t in self.bars)])  # fmt: skip
        label_w = min(self.width() * 0.4, 220.0)
        room = max(2.0, self.width() - label_w - value_w - 6)
        top = max(value for _l, value, _t in self.bars) or 1.0
        for i, (label, value, shown) in enumerate(self.bars):
            y = 24 + i * (BAR_HEIGHT + 6)
            painter.setPen(self.palette().text().color())
            text_rect = QRectF(0, y, label_w - 8, BAR_HEIGHT)
            elided = painter.fontMetrics().elidedText(
                label, Qt.TextElideMode.ElideMiddle, int(text_rect.width())
            )
            painter.drawText(text_rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
                             elided)  # fmt: skip
            width = max(2.0, room * value / top)
            colour = self.colours[i] if i < len(self.colours) else BAR_COLOUR
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(colour)
            painter.drawRoundedRect(QRectF(label_w, y + 2, width, BAR_HEIGHT - 4), 3, 3)
            painter.setPen(self.palette().text().color())
            painter.drawText(QRectF(label_w + width + 6, y, value_w, BAR_HEIGHT),
                             Qt.AlignmentFlag.AlignVCenter, shown)  # fmt: skip


class StatsDialog(QDialog):
    def __init__(self, load: LoadStats, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Statistics"))
        self._load = load
        self.period = QComboBox()
        self.period.addItems([translate("StatsDialog", name) for name, _days in PERIODS])
        self.period.setCurrentIndex(2)
        self.period.currentIndexChanged.connect(self.reload)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setToolTip(
            self.tr(
                "Images an hour of work: per hour in which at least one of these jobs was "
                "running (the union of their running stretches), not per hour of the period"
            )
        )
        self.statuses = BarChart(self.tr("Jobs per status"))
        self.run_times = BarChart(self.tr("Run time, median (p95) per model and size"))
        self.wait_times = BarChart(self.tr("Wait before running, median (p95)"))
        self.causes = BarChart(self.tr("Endings that were not a success, per 100 jobs"))
        top = QHBoxLayout()
        top.addWidget(QLabel(self.tr("Period")))
        top.addWidget(self.period)
        top.addStretch(1)
        charts = QGridLayout()
        charts.setHorizontalSpacing(24)
        charts.setVerticalSpacing(16)
        for i, chart in enumerate((self.statuses, self.causes, self.run_times, self.wait_times)):
            charts.addWidget(chart, i // 2, i % 2)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.Close).setText(self.tr("Close"))
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.summary)
        layout.addLayout(charts, 1)
        layout.addWidget(buttons)
        self.resize(860, 560)
        self.reload()

    def reload(self) -> None:
        self.summary.setText(self.tr("Reading the history…"))
        _name, days = PERIODS[self.period.currentIndex()]
        self._load(days, self.show_stats)

    def show_stats(self, data: dict[str, Any]) -> None:
        rate = data["images_per_working_hour"]  # None: no job ran in the period
        self.summary.setText(
            self.tr("{jobs} jobs · {rate} images an hour of work ({working} working) · "
                    "paused {paused} in all · {saved} steps saved by resuming").format(
                jobs=data["jobs"], rate="-" if rate is None else f"{rate:.1f}",
                working=format_duration(data["working_s"]),
                paused=format_duration(data["paused_s"]), saved=data["steps_saved_by_resume"],
            )
        )  # fmt: skip
        statuses = [(JobStatus(s), n) for s, n in data["per_status"].items()]
        self.statuses.set_bars(
            [(status_label(s), float(n), str(n)) for s, n in statuses],
            [status_colour(s) for s, _n in statuses],
        )
        self.causes.set_bars(
            [(translate("Cause", cause), rate * 100, f"{rate:.0%}")
             for cause, rate in data["failure_rate"].items()]
        )  # fmt: skip
        self.run_times.set_bars(_spread_bars(data["run_s"]))
        self.wait_times.set_bars(_spread_bars(data["wait_s"]))


def _spread_bars(groups: dict[str, dict[str, float | None]]) -> list[Bar]:
    bars = []
    for group, spread in groups.items():
        p50, p95 = spread["p50"], spread["p95"]
        if p50 is None:
            continue
        shown = f"{format_duration(p50)} ({format_duration(p95)})"
        bars.append((group, p50, shown))
    return bars


# The engine's cause names (app.engine.history.stats.Cause), for lupdate.
CAUSES = (
    QT_TRANSLATE_NOOP("Cause", "out of memory"),
    QT_TRANSLATE_NOOP("Cause", "model load"),
    QT_TRANSLATE_NOOP("Cause", "other error"),
    QT_TRANSLATE_NOOP("Cause", "worker lost"),
    QT_TRANSLATE_NOOP("Cause", "user cancelled"),
)
