"""The finished outputs for the gallery strip, newest first, as a Qt list model; each
shown as its output kind says (its thumbnail, its badge, whether the viewer takes it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt

from app.ui.itemmodels.job_list_model import BADGE_ROLE, ROW_ROLE, output_badge
from app.ui.presenters.rows import JobRow
from app.ui.qt.thumbnails import ThumbnailCache

Index = QModelIndex | QPersistentModelIndex
GALLERY_PAGE = 120


class GalleryModel(QAbstractListModel):
    def __init__(self, thumbs: ThumbnailCache, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[JobRow] = []
        self._given: list[JobRow] = []  # the last rows set, hidden ones included
        self._hidden: frozenset[int] = frozenset()  # being deleted: gone unless undone
        self._thumbs = thumbs
        thumbs.loaded.connect(self._loaded)

    def set_rows(self, rows: Sequence[JobRow]) -> None:
        self._given = [r for r in rows if r.output_path]
        rows = [r for r in self._given if r.id not in self._hidden]
        if [r.id for r in rows] == [r.id for r in self._rows]:
            return
        self.beginResetModel()
        self._rows = rows
        self.endResetModel()

    def hide(self, job_ids: Sequence[int]) -> None:
        """Leave out the images of `job_ids` (a delete waiting out its undo time)."""
        self._hidden = frozenset(job_ids)
        self.set_rows(self._given)

    def unhide(self) -> None:
        self._hidden = frozenset()
        self.set_rows(self._given)

    def paths(self) -> list[str]:
        """The finished outputs shown that the image viewer takes, newest first (it steps
        through these)."""
        return [
            row.output_path
            for row in self._rows
            if row.output_path and (kind := row.output_kind) and kind.gallery.in_viewer
        ]

    def follow_stars(self, fresh: Sequence[JobRow]) -> None:
        """Take the star of the jobs in `fresh` (the job list's newer rows): a star given in
        the list or under the image shows on the gallery's thumbnail too."""
        starred = {row.id: row.starred for row in fresh}
        for i, row in enumerate(self._rows):
            if row.id in starred and starred[row.id] != row.starred:
                self._rows[i] = replace(row, starred=starred[row.id])
                index = self.index(i)
                self.dataChanged.emit(index, index)

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row = self._rows[index.row()]
        if role == Qt.ItemDataRole.DecorationRole and row.output_path:
            return self._thumbs.get(row.output_path, row.output_kind)
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"Job {row.id}: {row.prompt}"
        if role == ROW_ROLE:
            return row
        if role == BADGE_ROLE:
            return output_badge(row)
        return None

    def _loaded(self, path: str) -> None:
        for i, row in enumerate(self._rows):
            if row.output_path == path:
                index = self.index(i)
                self.dataChanged.emit(index, index, [Qt.ItemDataRole.DecorationRole])
