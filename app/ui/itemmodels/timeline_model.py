"""A job's history as a tree: attempts, each with its transitions and the time between them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor

from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate
from app.ui.presenters.rows import NoteRow, TimelineRow, TransitionRow, format_duration
from app.ui.presenters.timeline_words import note_words, plain_words, technical
from app.ui.qt.theme import MUTED, status_colour

Index = QModelIndex | QPersistentModelIndex
TRANSITION_ROLE = Qt.ItemDataRole.UserRole + 1
TECHNICAL_ROLE = Qt.ItemDataRole.UserRole + 2  # the stored row: statuses, event, source, message


class TCol(IntEnum):
    TIME = 0
    WHAT = 1  # in plain words; the technical row is in the Details view
    AFTER = 2


HEADERS = (
    QT_TRANSLATE_NOOP("Timeline", "Time"),
    QT_TRANSLATE_NOOP("Timeline", "What happened"),
    QT_TRANSLATE_NOOP("Timeline", "After"),
)


@dataclass(frozen=True)
class Attempt:
    number: int
    rows: tuple[TimelineRow, ...]  # its transitions, and the notes beside them, in time order
    # The transition before this attempt's first one, so its first "after" is meaningful.
    previous_at: float | None

    @property
    def transitions(self) -> tuple[TransitionRow, ...]:
        return tuple(row for row in self.rows if isinstance(row, TransitionRow))

    @property
    def span_s(self) -> float:
        changes = self.transitions
        return changes[-1].at - changes[0].at if changes else 0.0


def group_by_attempt(rows: Sequence[TransitionRow], notes: Sequence[NoteRow] = ()) -> list[Attempt]:
    """The transitions by attempt; each note goes with the attempt it was written in (the
    last one if that attempt has no transitions), in time order."""
    groups: list[list[TimelineRow]] = []
    for row in rows:
        if not groups or groups[-1][0].attempt != row.attempt:
            groups.append([])
        groups[-1].append(row)
    for note in notes:
        home = [group for group in groups if group[0].attempt == note.attempt]
        if home or groups:
            (home or groups)[-1].append(note)
        else:
            groups.append([note])
    attempts, previous = [], None
    for group in groups:
        ordered = sorted(group, key=lambda row: (row.at, isinstance(row, NoteRow)))
        attempts.append(Attempt(group[0].attempt, tuple(ordered), previous))
        changes = [row for row in ordered if isinstance(row, TransitionRow)]
        previous = changes[-1].at if changes else previous
    return attempts


class TimelineModel(QAbstractItemModel):
    # internalId: 0 for an attempt row; attempt index + 1 for a transition row under it.

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._attempts: list[Attempt] = []
        self.job_id: int | None = None

    def set_rows(
        self, job_id: int | None, rows: Sequence[TransitionRow], notes: Sequence[NoteRow] = ()
    ) -> None:
        attempts = group_by_attempt(rows, notes)
        if job_id == self.job_id and attempts == self._attempts:
            return
        self.beginResetModel()
        self.job_id, self._attempts = job_id, attempts
        self.endResetModel()

    def transitions(self) -> list[TransitionRow]:
        return [row for attempt in self._attempts for row in attempt.transitions]

    def rows(self) -> list[TimelineRow]:
        """Every row shown: the transitions and the notes."""
        return [row for attempt in self._attempts for row in attempt.rows]

    def row_total(self) -> int:
        return sum(len(attempt.rows) for attempt in self._attempts)

    def index(self, row: int, column: int, parent: Index = QModelIndex()) -> QModelIndex:  # noqa: B008
        if not self.hasIndex(row, column, parent):
            return QModelIndex()
        if not parent.isValid():
            return self.createIndex(row, column, 0)
        return self.createIndex(row, column, parent.row() + 1)

    def parent(self, index: Index = QModelIndex()) -> QModelIndex:  # type: ignore[override]  # noqa: B008
        if not index.isValid() or index.internalId() == 0:
            return QModelIndex()
        return self.createIndex(index.internalId() - 1, 0, 0)

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        if not parent.isValid():
            return len(self._attempts)
        if parent.internalId() == 0 and parent.column() == 0:
            return len(self._attempts[parent.row()].rows)
        return 0

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return len(TCol)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = 0) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return translate("Timeline", HEADERS[section]) if 0 <= section < len(HEADERS) else None
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        col = TCol(index.column())
        if index.internalId() == 0:
            return self._attempt_data(self._attempts[index.row()], col, role)
        attempt = self._attempts[index.internalId() - 1]
        row = attempt.rows[index.row()]
        before = attempt.rows[index.row() - 1].at if index.row() else attempt.previous_at
        return self._transition_data(row, before, col, role)

    def _attempt_data(self, attempt: Attempt, col: TCol, role: int) -> Any:
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if col is TCol.TIME:
            return translate("Timeline", "Attempt {n}").format(n=attempt.number)
        if col is TCol.WHAT:
            n = len(attempt.transitions)  # changes of status; notes are not counted
            one = n == 1
            text = (
                translate("Timeline", "1 change") if one else translate("Timeline", "{n} changes")
            )
            return text.format(n=n)
        if col is TCol.AFTER:
            return format_duration(attempt.span_s)
        return None

    def _transition_data(self, row: TimelineRow, before: float | None, col: TCol, role: int) -> Any:
        if role == TRANSITION_ROLE:
            return row
        if role == Qt.ItemDataRole.ForegroundRole and col is TCol.WHAT:
            if isinstance(row, NoteRow):
                return QColor(MUTED)  # no status: the muted text of the theme
            return status_colour(row.to_status).lighter(130)
        words = note_words(row) if isinstance(row, NoteRow) else plain_words(row)
        if role == Qt.ItemDataRole.ToolTipRole and col is TCol.WHAT:
            return words  # the whole sentence, should the column be narrow
        if role == TECHNICAL_ROLE:
            return technical(row)  # the exact stored row: the Details view shows it
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if col is TCol.TIME:
            return datetime.fromtimestamp(row.at).strftime("%H:%M:%S.%f")[:-5]  # tenths
        if col is TCol.WHAT:
            return words
        return "" if before is None else f"+{format_duration(row.at - before)}"
