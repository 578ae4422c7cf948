"""The job list as a Qt table model: queued jobs first in the order they will run, then the
rest newest first, one page at a time, merged in place.

Rows are `JobRow` snapshots; a refresh merges the new page into the old rows (remove,
insert, move, change) so the selection and scroll position survive updates, and a job
moved in the queue moves in the list.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QByteArray,
    QMimeData,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    Signal,
)

from app.engine.jobs.states import JobStatus
from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate
from app.ui.presenters.rows import JobRow, eta_s, format_duration
from app.ui.qt.live import LiveProgress
from app.ui.qt.thumbnails import ThumbnailCache

Index = QModelIndex | QPersistentModelIndex

MAX_INCREMENTAL = 60  # more changes than this at once: a reset is cheaper than many signals


class Col(IntEnum):
    IMAGE = 0
    PROMPT = 1
    STATUS = 2
    PROGRESS = 3
    ATTEMPT = 4
    CREATED = 5
    DURATION = 6


HEADERS = {
    Col.IMAGE: "",
    Col.PROMPT: QT_TRANSLATE_NOOP("JobList", "Prompt"),
    Col.STATUS: QT_TRANSLATE_NOOP("JobList", "Status"),
    Col.PROGRESS: QT_TRANSLATE_NOOP("JobList", "Progress"),
    Col.ATTEMPT: QT_TRANSLATE_NOOP("JobList", "Attempt"),
    Col.CREATED: QT_TRANSLATE_NOOP("JobList", "Created"),
    Col.DURATION: QT_TRANSLATE_NOOP("JobList", "Duration"),
}

_DISPLAY = int(Qt.ItemDataRole.DisplayRole)
_DECORATION = int(Qt.ItemDataRole.DecorationRole)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole)
_ALIGNMENT = int(Qt.ItemDataRole.TextAlignmentRole)
_ALIGN_CENTRE = int(Qt.AlignmentFlag.AlignCenter)
ROW_ROLE = int(Qt.ItemDataRole.UserRole) + 1  # the JobRow
DETAIL_ROLE = int(Qt.ItemDataRole.UserRole) + 3  # the muted second line under the prompt
PROGRESS_ROLE = int(Qt.ItemDataRole.UserRole) + 2  # (step, total, eta seconds or None)
BADGE_ROLE = int(Qt.ItemDataRole.UserRole) + 4  # the output kind's mark on the thumbnail
JOB_IDS_MIME = "application/x-easel-job-ids"  # queued jobs dragged within the list


class JobListModel(QAbstractTableModel):
    # Queued jobs dropped on another queued job: (moved ids, the job they go before). The
    # store decides the order; the list follows at the next refresh (no rows move here).
    reorder_requested = Signal(object, int)

    def __init__(
        self,
        live: LiveProgress,
        thumbs: ThumbnailCache,
        fetch_more: Callable[[int], None] | None = None,
        parent: Any = None,
    ) -> None:
        super().__init__(parent)
        self._rows: list[JobRow] = []
        self._row_of: dict[int, int] = {}
        self._live = live
        self._thumbs = thumbs
        self._fetch_more = fetch_more
        self.more_available = False
        self.fetching = False
        self._in_run_order = False  # queued jobs are at the top (not in the pages below)
        live.changed.connect(self._live_changed)
        thumbs.loaded.connect(self._thumb_loaded)

    # --- Qt model interface -------------------------------------------------------------------

    def flags(self, index: Index) -> Qt.ItemFlag:
        flags = super().flags(index)
        row = self.job_at(index)
        if row is not None and row.status is JobStatus.PENDING:  # only queued jobs reorder
            flags |= Qt.ItemFlag.ItemIsDragEnabled | Qt.ItemFlag.ItemIsDropEnabled
        return flags

    def supportedDropActions(self) -> Qt.DropAction:
        return Qt.DropAction.MoveAction

    def mimeTypes(self) -> list[str]:
        return [JOB_IDS_MIME]

    def mimeData(self, indexes: Sequence[QModelIndex]) -> QMimeData:
        rows = dict.fromkeys(r for i in indexes if (r := self.job_at(i)) is not None)
        ids = [str(row.id) for row in rows if row.status is JobStatus.PENDING]
        data = QMimeData()
        data.setData(JOB_IDS_MIME, QByteArray(",".join(ids).encode()))
        return data

    def dropMimeData(
        self, data: QMimeData, action: Qt.DropAction, row: int, column: int, parent: Index
    ) -> bool:
        """Asks the store to move the dragged jobs before the one dropped on. Returns False:
        the view must not remove rows itself (the next refresh shows the new order)."""
        target = self.job_at(parent) if parent.isValid() else self.job_at(self.index(row, 0))
        ids = [int(i) for i in bytes(data.data(JOB_IDS_MIME).data()).decode().split(",") if i]
        moved = [i for i in ids if target is None or i != target.id]
        if target is not None and target.status is JobStatus.PENDING and moved:
            self.reorder_requested.emit(moved, target.id)
        return False

    def job_at(self, index: Index) -> JobRow | None:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        return self._rows[index.row()]

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(Col)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = 0) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return translate("JobList", HEADERS[Col(section)]) if 0 <= section < len(Col) else None
        return None

    def data(self, index: Index, role: int = _DISPLAY) -> Any:
        # Called tens of thousands of times a second while scrolling: plain ints, early exits.
        if role not in _ROLES or not index.isValid():
            return None
        position = index.row()
        if not 0 <= position < len(self._rows):
            return None
        row, col = self._rows[position], index.column()
        if role == _DISPLAY:
            return self._text(row, col)
        if role == ROW_ROLE:
            return row
        if role == PROGRESS_ROLE:
            return self._progress(row)
        if role == DETAIL_ROLE:
            return detail_line(row)
        if role == BADGE_ROLE:
            return output_badge(row)
        if role == _DECORATION:
            return self._image(row) if col == Col.IMAGE else None
        if role == _TOOLTIP:
            return _tooltip(row)
        return _ALIGN_CENTRE if col in _CENTRED else None

    def canFetchMore(self, parent: Index) -> bool:
        return not parent.isValid() and self.more_available and not self.fetching

    def fetchMore(self, parent: Index) -> None:
        if self.canFetchMore(parent) and self._fetch_more is not None and self._rows:
            self.fetching = True
            self._fetch_more(self._oldest_id())

    def _oldest_id(self) -> int:
        """Where the next page starts: the oldest job loaded (queued ones sit at the top)."""
        return min(self._row_of)

    # --- reading rows -------------------------------------------------------------------------

    def row_at(self, row: int) -> JobRow:
        return self._rows[row]

    def row_of(self, job_id: int) -> int | None:
        return self._row_of.get(job_id)

    def job(self, job_id: int) -> JobRow | None:
        row = self._row_of.get(job_id)
        return None if row is None else self._rows[row]

    def rows(self) -> list[JobRow]:
        return list(self._rows)

    # --- updating -----------------------------------------------------------------------------

    def replace_head(
        self,
        rows: Sequence[JobRow],
        complete: bool,
        updates: Mapping[int, JobRow | None] | None = None,
        queued: Sequence[JobRow] | None = None,
    ) -> None:
        """Merge a fresh first page; `complete`: it holds every job the filter matches.

        Rows below the page stay as loaded, except those in `updates` (None: left the filter).
        `queued`: the queued jobs in the queue's order, shown first (None: newest first).
        """
        updates = updates or {}
        if complete or not rows:
            target = list(rows)
        else:
            oldest = rows[-1].id
            tail = (updates.get(r.id, r) for r in self._rows if r.id < oldest)
            target = [*rows, *(r for r in tail if r is not None)]
        self._in_run_order = queued is not None
        if queued is not None:
            first = {r.id for r in queued}
            rest = (r for r in target if r.id not in first and r.status is not JobStatus.PENDING)
            target = [*queued, *rest]
        self.more_available = not complete
        self._merge(target)

    def append_page(self, rows: Sequence[JobRow], full: bool) -> None:
        self.fetching = False
        self.more_available = full
        last = self._oldest_id() if self._rows else None
        fresh = [r for r in rows if last is None or r.id < last]
        if self._in_run_order:  # the queued ones are listed at the top already
            fresh = [r for r in fresh if r.status is not JobStatus.PENDING]
        if fresh:
            first = len(self._rows)
            self.beginInsertRows(QModelIndex(), first, first + len(fresh) - 1)
            self._rows.extend(fresh)
            self._reindex()
            self.endInsertRows()

    def clear(self) -> None:
        self.beginResetModel()
        self._rows = []
        self._row_of = {}
        self.more_available = False
        self.fetching = False
        self.endResetModel()

    def _merge(self, target: list[JobRow]) -> None:
        wanted = {r.id for r in target}
        removed = [i for i, r in enumerate(self._rows) if r.id not in wanted]
        added = [r for r in target if r.id not in self._row_of]
        if len(removed) + len(added) > MAX_INCREMENTAL:
            self.beginResetModel()
            self._rows = target
            self._reindex()
            self.endResetModel()
            return
        for i in reversed(removed):
            self.beginRemoveRows(QModelIndex(), i, i)
            del self._rows[i]
            self.endRemoveRows()
        self._reindex()
        order = [r.id for r in target if r.id in self._row_of]
        if order != [r.id for r in self._rows]:  # a queued job moved: move its row
            self._reorder(order)
        self._insert_and_update(target)

    def _reorder(self, order: list[int]) -> None:
        """Put the rows in `order` (their ids) as one layout change: selections follow."""
        self.layoutAboutToBeChanged.emit()
        before = [r.id for r in self._rows]
        by_id = {r.id: r for r in self._rows}
        self._rows = [by_id[job_id] for job_id in order]
        self._reindex()
        old = self.persistentIndexList()
        new = [self.index(self._row_of[before[i.row()]], i.column()) for i in old]
        self.changePersistentIndexList(old, new)
        self.layoutChanged.emit()

    def _insert_and_update(self, target: list[JobRow]) -> None:
        # Both lists are in the same order, and every current row is in `target`: walk them.
        for position, row in enumerate(target):
            current = self._rows[position] if position < len(self._rows) else None
            if current is not None and current.id == row.id:
                if current != row:
                    self._rows[position] = row
                    self._changed(position)
                continue
            self.beginInsertRows(QModelIndex(), position, position)
            self._rows.insert(position, row)
            self.endInsertRows()
        self._reindex()

    def _reindex(self) -> None:
        self._row_of = {r.id: i for i, r in enumerate(self._rows)}

    def _changed(self, row: int, first: Col = Col.IMAGE, last: Col = Col.DURATION) -> None:
        self.dataChanged.emit(self.index(row, first), self.index(row, last))

    def tick(self) -> None:
        """Running jobs' durations and ETAs move with the clock."""
        for i, row in enumerate(self._rows):
            if row.status.is_running:
                self._changed(i, Col.PROGRESS, Col.DURATION)

    def _live_changed(self, job_id: int) -> None:
        row = self._row_of.get(job_id)
        if row is not None:
            self._changed(row, Col.IMAGE, Col.PROGRESS)

    def _thumb_loaded(self, path: str) -> None:
        for i, row in enumerate(self._rows):
            if row.output_path == path:
                self._changed(i, Col.IMAGE, Col.IMAGE)

    # --- cell contents ------------------------------------------------------------------------

    def _text(self, row: JobRow, col: int) -> str | None:
        if col == Col.PROMPT:
            return row.prompt
        if col == Col.STATUS:
            return row.status_text
        if col == Col.PROGRESS:
            step, total, _eta = self._progress(row)
            return f"{step}/{total}"
        if col == Col.ATTEMPT:
            return f"{row.attempt}/{row.max_attempts}"
        if col == Col.CREATED:
            return row.created_label
        if col == Col.DURATION:
            return format_duration(row.duration_s(time.time()))
        return None

    def _progress(self, row: JobRow) -> tuple[int, int, float | None]:
        live = self._live.get(row.id)
        if live is not None and row.status.is_running and live.step >= row.progress_step:
            return live.step, live.total or row.progress_total, live.eta_s()
        eta = None
        if row.status.is_running and row.started_at is not None:
            eta = eta_s(row.progress_step, row.progress_total, time.time() - row.started_at)
        return row.progress_step, row.progress_total, eta

    def _image(self, row: JobRow) -> Any:
        if row.output_path:
            return self._thumbs.get(row.output_path, row.output_kind)
        live = self._live.get(row.id)
        if live is not None and live.preview is not None and row.status.is_running:
            return live.preview
        return None


_CENTRED = frozenset({int(Col.ATTEMPT), int(Col.CREATED), int(Col.DURATION)})
_ROLES = frozenset({_DISPLAY, _DECORATION, _TOOLTIP, _ALIGNMENT, ROW_ROLE, PROGRESS_ROLE,
                    DETAIL_ROLE, BADGE_ROLE})  # fmt: skip


def output_badge(row: JobRow) -> str:
    """The mark the job's kind of output puts on its thumbnail ("": none, or no output)."""
    kind = row.output_kind
    return kind.gallery.badge if kind is not None and row.output_path else ""


def detail_line(row: JobRow) -> str:
    p = row.params
    seed = translate("JobList", "seed {seed}").format(seed=p.seed)
    # What the job needs (model, size) first: the prompt above has the room to tell jobs apart.
    parts = [f"#{row.id}", model_words(row), f"{p.width}×{p.height}", seed]
    if row.after is not None:
        parts.append(translate("JobList", "after #{id}").format(id=row.after))
    if row.group_id is not None:  # a batch or grid: its members read as one
        parts.append(group_label(row))
    if row.ran_elsewhere:  # on one computer, naming it on every row would be noise
        parts.append(translate("JobList", "on {machine}").format(machine=row.machine))
    if row.priority:
        parts.append(translate("JobList", "priority {n}").format(n=f"{row.priority:+d}"))
    if row.rerun_of:
        parts.append(translate("JobList", "re-run of #{id}").format(id=row.rerun_of))
    if row.waiting:
        parts.append(row.waiting)
    if row.error and not row.status.is_terminal:
        parts.append(row.error)
    return " · ".join(parts)


def model_words(row: JobRow) -> str:
    """The model, and for a queued job whether a worker holds it loaded: "sdxl-base ·
    loaded", "sd15 · needs loading (~4.0 s)" (the load learned from the history)."""
    model = row.params.model
    if row.model_loaded is None or row.status is not JobStatus.PENDING:
        return model
    if row.model_loaded:
        return translate("JobList", "{model} · loaded").format(model=model)
    if row.load_s is None:  # never timed a load: no figure to give
        return translate("JobList", "{model} · needs loading").format(model=model)
    return translate("JobList", "{model} · needs loading (~{time})").format(
        model=model, time=format_duration(row.load_s)
    )


def group_label(row: JobRow) -> str:
    """ "group 3, cell 2" for a member, "group 3, its grid" for a grid's composing job."""
    if row.group_cell is None:
        return translate("JobList", "group {group}, its grid").format(group=row.group_id)
    return translate("JobList", "group {group}, cell {cell}").format(
        group=row.group_id, cell=row.group_cell + 1
    )


def _tooltip(row: JobRow) -> str:
    p = row.params
    settings = translate(
        "JobList", "{model} · {sampler} · {steps} steps · CFG {cfg} · seed {seed} · {size}"
    )
    lines = [
        translate("JobList", "Job {id}: {status}").format(
            id=row.id, status=row.status_text
        ),
        p.prompt,
        settings.format(model=p.model, sampler=p.scheduler, steps=p.steps, cfg=f"{p.cfg:g}",
                        seed=p.seed, size=f"{p.width}×{p.height}"),
        translate("JobList", "Created {at} · attempt {n} of {most}").format(
            at=row.created_label, n=row.attempt, most=row.max_attempts),
    ]  # fmt: skip
    if p.init_image and p.strength < 1.0:  # the row counts the steps that run: say why
        lines.append(
            translate(
                "JobList", "From an image at strength {s}: {run} of its {steps} steps run"
            ).format(s=f"{p.strength:g}", run=p.denoising_steps, steps=p.steps)
        )
    if row.machine:
        ran = (
            translate("JobList", "Last run on {machine}")
            if row.ran_elsewhere
            else translate("JobList", "Last run on this computer ({machine})")
        )
        lines.append(ran.format(machine=row.machine))
    if row.error:
        lines.append(translate("JobList", "Error: {error}").format(error=row.error))
    if row.rerun_of:
        lines.append(translate("JobList", "Re-run of job {id}").format(id=row.rerun_of))
    if row.after is not None:
        lines.append(translate("JobList", "Built on the image of job {id}").format(id=row.after))
    if row.waiting:
        lines.append(row.waiting)
    if row.queue_position:  # the place is the queue's order, not a forecast: say what bends it
        lines.append(
            translate(
                "JobList",
                "Queued jobs are listed by priority, then age. A worker that has a job's model "
                "loaded takes that job first, passing others over only a few times, so a "
                "model is not reloaded for every job.",
            )
        )
    return "\n".join(lines)
