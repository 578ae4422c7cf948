"""A strip of finished images, newest first; clicking one shows it, Delete removes it."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QAbstractItemView, QListView, QMenu

from app.ui.itemmodels.delegates import ThumbnailDelegate
from app.ui.itemmodels.job_list_model import ROW_ROLE
from app.ui.presenters.i18n import translate
from app.ui.qt.thumbnails import THUMB_SIDE
from app.ui.widgets.empty_views import EmptyListView


class GalleryView(EmptyListView):
    # The job ids of the images to delete (the Delete key, or the right-click menu).
    delete_requested = Signal(object)

    def __init__(self) -> None:
        super().__init__(translate("GalleryView", "Finished images collect here"))
        self.setObjectName("gallery")
        self.setViewMode(QListView.ViewMode.IconMode)
        self.setFlow(QListView.Flow.LeftToRight)
        self.setWrapping(False)
        self.setIconSize(QSize(THUMB_SIDE, THUMB_SIDE))
        self.setGridSize(QSize(THUMB_SIDE + 12, THUMB_SIDE + 12))
        # Thumbnails arrive after the first paint: a fixed-size delegate keeps the grid stable.
        self.setItemDelegate(ThumbnailDelegate(THUMB_SIDE, self))
        self.setMovement(QListView.Movement.Static)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFixedHeight(THUMB_SIDE + 34)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu)

    def selected_ids(self) -> list[int]:
        return [row.id for i in self.selectedIndexes() if (row := i.data(ROW_ROLE)) is not None]

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace) and self.selected_ids():
            self.delete_requested.emit(self.selected_ids())
            return
        super().keyPressEvent(event)

    def _menu(self, at: QPoint) -> None:
        index = self.indexAt(at)
        row = index.data(ROW_ROLE) if index.isValid() else None
        if row is None:
            return
        menu = QMenu(self)
        delete = menu.addAction(translate("GalleryView", "Delete image and job"))
        delete.triggered.connect(lambda: self.delete_requested.emit([row.id]))
        menu.popup(self.viewport().mapToGlobal(at))
