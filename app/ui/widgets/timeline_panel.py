"""The selected job's timeline: the lane drawing above the grouped transition table."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QToolButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from app.ui.itemmodels.timeline_model import TECHNICAL_ROLE, TCol, TimelineModel
from app.ui.presenters.rows import NoteRow, TransitionRow
from app.ui.presenters.timeline_words import technical
from app.ui.widgets.lanes import LaneView


class TimelinePanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = TimelineModel(self)
        self.title = QLabel(self.tr("Timeline"))
        self.title.setObjectName("sectionTitle")
        self.lanes = LaneView()
        self.tree = QTreeView()
        self.tree.setModel(self.model)
        # The sentences wrap in a narrow column rather than end in "…".
        self.tree.setUniformRowHeights(False)
        self.tree.setWordWrap(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setRootIsDecorated(True)
        self.tree.setIndentation(14)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.resizeSection(TCol.TIME, 116)
        header.resizeSection(TCol.AFTER, 64)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(TCol.WHAT, QHeaderView.ResizeMode.Stretch)
        header.sectionResized.connect(lambda *_: self.tree.doItemsLayout())  # re-wrap
        # The stored rows (statuses, event, who, message, worker id), for whoever asks.
        self.details_button = QToolButton()
        self.details_button.setText(self.tr("Details"))
        self.details_button.setCheckable(True)
        self.details_button.setToolTip(
            self.tr("Show the stored record of the selected change (or of every change)")
        )
        self.details = QPlainTextEdit()
        self.details.setObjectName("timelineDetails")
        self.details.setReadOnly(True)
        self.details.setMaximumHeight(90)
        self.details.hide()
        self.details_button.toggled.connect(self._show_details)
        self.tree.selectionModel().currentChanged.connect(self._fill_details)
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.details_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addLayout(top)
        layout.addWidget(self.lanes)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.details)

    def show_job(
        self, job_id: int | None, rows: Sequence[TransitionRow], notes: Sequence[NoteRow] = ()
    ) -> None:
        changed = job_id != self.model.job_id or len(rows) + len(notes) != self.model.row_total()
        self.model.set_rows(job_id, rows, notes)
        self.lanes.set_rows(rows)  # the lanes draw statuses: notes change none
        self.title.setText(
            self.tr("Timeline · job {id}").format(id=job_id)
            if job_id is not None
            else self.tr("Timeline")
        )
        if changed:
            self.tree.expandAll()
        self._fill_details()

    def tick(self) -> None:
        if self.lanes.has_running_span():
            self.lanes.update()

    def _show_details(self, on: bool) -> None:
        self.details.setVisible(on)
        self._fill_details()

    def _fill_details(self, *_args: object) -> None:
        if not self.details.isVisible():
            return
        current = self.tree.currentIndex()
        one = current.data(TECHNICAL_ROLE) if current.isValid() else None
        if one is not None:
            self.details.setPlainText(str(one))
            return
        rows = self.model.rows()
        self.details.setPlainText("\n".join(technical(row) for row in rows))
