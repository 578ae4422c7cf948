"""Item views that say what belongs in them while they are empty (first launch, a filter)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QAbstractItemView, QListView, QTableView

from app.ui.qt.theme import MUTED


def paint_empty_text(view: QAbstractItemView, text: str) -> None:
    model = view.model()
    if model is not None and model.rowCount() > 0:
        return
    painter = QPainter(view.viewport())
    painter.setPen(QColor(MUTED))
    flags = Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap
    painter.drawText(view.viewport().rect().adjusted(24, 0, -24, 0), flags, text)
    painter.end()


class EmptyTableView(QTableView):
    def __init__(self, empty_text: str) -> None:
        super().__init__()
        self.empty_text = empty_text

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        paint_empty_text(self, self.empty_text)


class EmptyListView(QListView):
    def __init__(self, empty_text: str) -> None:
        super().__init__()
        self.empty_text = empty_text

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        paint_empty_text(self, self.empty_text)
