"""A swim-lane drawing of one job: a lane per status, a bar while the job was in it."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QLinearGradient, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.engine.jobs.states import JobStatus
from app.ui.presenters.rows import TransitionRow, format_duration, status_label
from app.ui.qt.theme import MUTED, status_colour

LANE_HEIGHT = 20
LABEL_WIDTH = 92
MIN_BAR = 3.0  # px: a 5 ms PENDING must still be visible next to a 30 s PROCESSING
OPEN_STUB = 28.0  # px: a status the job rests in (paused, failed) drawn open-ended
# Statuses whose time keeps counting: drawn to scale up to now. Others end in a stub, so
# a job paused for a day does not squash the minutes of work before it.
_ADVANCING = frozenset({JobStatus.PENDING, JobStatus.PROCESSING, JobStatus.CANCELLING,
                        JobStatus.PAUSING})  # fmt: skip


@dataclass(frozen=True)
class Span:
    status: JobStatus
    start: float
    end: float
    attempt: int


def spans(rows: Sequence[TransitionRow], now: float) -> list[Span]:
    """The time spent in each status; the last runs to `now` while the job is advancing."""
    result = []
    for i, row in enumerate(rows):
        if i + 1 < len(rows):
            end = rows[i + 1].at
        else:
            end = max(now, row.at) if row.to_status in _ADVANCING else row.at
        result.append(Span(row.to_status, row.at, end, row.attempt))
    return result


class LaneView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: list[TransitionRow] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(LANE_HEIGHT * 2 + 24)

    def set_rows(self, rows: Sequence[TransitionRow]) -> None:
        self._rows = list(rows)
        self.setFixedHeight(max(2, len(self._lanes())) * LANE_HEIGHT + 26)
        self.update()

    def has_running_span(self) -> bool:
        return bool(self._rows) and not self._rows[-1].to_status.is_terminal

    def _lanes(self) -> list[JobStatus]:
        return list(dict.fromkeys(row.to_status for row in self._rows))

    def sizeHint(self) -> QSize:
        return QSize(400, self.minimumHeight())

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if not self._rows:
            painter.setPen(QColor(MUTED))
            painter.drawText(
                self.rect(),
                Qt.AlignmentFlag.AlignCenter,
                self.tr("Select a job to see its timeline"),
            )
            return
        items = spans(self._rows, time.time())
        lanes = self._lanes()
        t0, t1 = items[0].start, max(s.end for s in items)
        width = self.width() - LABEL_WIDTH - 12 - OPEN_STUB
        scale = width / (t1 - t0) if t1 > t0 else 0.0
        self._paint_lanes(painter, lanes)
        self._paint_attempt_marks(painter, items, t0, scale)
        previous = None
        for span in items:
            y = 4 + lanes.index(span.status) * LANE_HEIGHT
            x = LABEL_WIDTH + (span.start - t0) * scale
            bar = QRectF(x, y + 3, max(MIN_BAR, (span.end - span.start) * scale), LANE_HEIGHT - 6)
            if previous is not None:  # a thin step line shows where the job jumped lanes
                painter.setPen(QPen(QColor(255, 255, 255, 60), 1))
                painter.drawLine(
                    int(bar.x()), int(previous.center().y()), int(bar.x()), int(bar.center().y())
                )
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(status_colour(span.status))
            painter.drawRoundedRect(bar, 3, 3)
            self._paint_duration(painter, bar, span.end - span.start)
            previous = bar
        last = items[-1]
        if last.status not in _ADVANCING and not last.status.is_terminal:
            self._paint_open_end(painter, previous, last.status)
        self._paint_axis(painter, len(lanes), t1 - t0)

    def _paint_duration(self, painter: QPainter, bar: QRectF, seconds: float) -> None:
        """How long the job stayed, inside the bar when it fits (it usually does for work)."""
        painter.save()
        font = painter.font()
        font.setPointSizeF(max(6.5, font.pointSizeF() * 0.75))
        painter.setFont(font)
        text = format_duration(seconds)
        if painter.fontMetrics().horizontalAdvance(text) + 10 <= bar.width():
            painter.setPen(QColor(255, 255, 255, 230))
            painter.drawText(bar, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()

    def _paint_open_end(self, painter: QPainter, bar: QRectF | None, status: JobStatus) -> None:
        """The job rests here (paused, failed): a bar fading out to the right."""
        if bar is None:
            return
        stub = QRectF(bar.right(), bar.y(), OPEN_STUB, bar.height())
        gradient = QLinearGradient(stub.topLeft(), stub.topRight())
        colour = status_colour(status)
        gradient.setColorAt(0, colour)
        colour.setAlpha(0)
        gradient.setColorAt(1, colour)
        painter.setBrush(gradient)
        painter.drawRect(stub)

    def _paint_lanes(self, painter: QPainter, lanes: list[JobStatus]) -> None:
        for i, status in enumerate(lanes):
            y = 4 + i * LANE_HEIGHT
            if i % 2 == 0:
                painter.fillRect(QRectF(0, y, self.width(), LANE_HEIGHT), QColor(255, 255, 255, 8))
            painter.setPen(status_colour(status).lighter(125))
            painter.drawText(
                QRectF(6, y, LABEL_WIDTH - 10, LANE_HEIGHT),
                Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                status_label(status),
            )

    def _paint_attempt_marks(
        self, painter: QPainter, items: list[Span], t0: float, scale: float
    ) -> None:
        painter.setPen(QPen(QColor(255, 255, 255, 50), 1, Qt.PenStyle.DashLine))
        for before, span in itertools.pairwise(items):
            if span.attempt != before.attempt:
                x = LABEL_WIDTH + (span.start - t0) * scale
                painter.drawLine(int(x), 0, int(x), self.height() - 18)

    def _paint_axis(self, painter: QPainter, lanes: int, total_s: float) -> None:
        y = 4 + lanes * LANE_HEIGHT + 4
        painter.setPen(QColor(MUTED))
        left = QRectF(LABEL_WIDTH, y, 120, 16)
        painter.drawText(left, Qt.AlignmentFlag.AlignLeft, format_duration(0))
        right = QRectF(self.width() - 132 - OPEN_STUB, y, 120, 16)
        painter.drawText(right, Qt.AlignmentFlag.AlignRight, format_duration(total_s))
