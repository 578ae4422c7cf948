"""The selected job's timeline: the lane drawing above the grouped transition table."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QHeaderView, QLabel, QTreeView, QVBoxLayout, QWidget

from app.ui.itemmodels.timeline_model import TCol, TimelineModel
from app.ui.presenters.rows import TransitionRow
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
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setRootIsDecorated(True)
        self.tree.setIndentation(14)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.resizeSection(TCol.TIME, 116)
        header.resizeSection(TCol.AFTER, 64)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(TCol.WHAT, QHeaderView.ResizeMode.Stretch)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.title)
        layout.addWidget(self.lanes)
        layout.addWidget(self.tree, 1)

    def show_job(self, job_id: int | None, rows: Sequence[TransitionRow]) -> None:
        changed = job_id != self.model.job_id or len(rows) != len(self.model.transitions())
        self.model.set_rows(job_id, rows)
        self.lanes.set_rows(rows)
        self.title.setText(
            self.tr("Timeline · job {id}").format(id=job_id)
            if job_id is not None
            else self.tr("Timeline")
        )
        if changed:
            self.tree.expandAll()

    def tick(self) -> None:
        if self.lanes.has_running_span():
            self.lanes.update()
