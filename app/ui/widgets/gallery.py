"""A strip of finished images, newest first; clicking one shows it."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QAbstractItemView, QListView

from app.ui.itemmodels.delegates import ThumbnailDelegate
from app.ui.presenters.i18n import translate
from app.ui.qt.thumbnails import THUMB_SIDE
from app.ui.widgets.empty_views import EmptyListView


class GalleryView(EmptyListView):
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
