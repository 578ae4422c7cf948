"""A larger viewer for finished images: fit or zoom, previous/next, copy, show in the folder.

Opened with Enter in the job list or a double click on the image; the images it steps
through are the finished ones, newest first (the gallery's order).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import (
    QDesktopServices,
    QGuiApplication,
    QImage,
    QKeySequence,
    QPixmap,
    QResizeEvent,
    QShortcut,
)
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.ui.presenters.png_params import A1111_KEY
from app.ui.qt.file_manager import FileManager

ZOOM_STEP = 1.25
MAX_ZOOM = 16.0


class ImageViewer(QDialog):
    problem = Signal(str)

    def __init__(self, paths: Sequence[str], index: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Image"))
        self.resize(900, 760)
        self.paths = list(paths)
        self.index = index
        self.image = QImage()
        self.zoom: float | None = None  # None: fit the window
        self.picture = QLabel(alignment=Qt.AlignmentFlag.AlignCenter)
        self.area = QScrollArea()
        self.area.setWidget(self.picture)
        self.area.setWidgetResizable(True)
        self.area.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption = QLabel()
        self.caption.setObjectName("caption")
        # Beside the image: its prompt and settings, as the PNG carries them (A1111's text).
        self.details = QPlainTextEdit()
        self.details.setObjectName("viewerDetails")
        self.details.setReadOnly(True)
        self.details.setMinimumWidth(200)
        # Compare: an image pinned on the left while the arrows go through the others.
        self.pinned: QImage | None = None
        self.pinned_path = ""
        self.left = QLabel(alignment=Qt.AlignmentFlag.AlignCenter)
        self.left.setMinimumWidth(120)
        self.left.hide()
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.addWidget(self.left)
        self.split.addWidget(self.area)
        self.split.addWidget(self.details)
        self.split.setStretchFactor(1, 1)
        self.split.setSizes([0, 640, 260])
        self.file_manager = FileManager(self)
        self.file_manager.problem.connect(self.problem)
        self._build_buttons()
        self.show_index(index)

    def _build_buttons(self) -> None:
        bar = QHBoxLayout()
        # name (the key in self.buttons), text shown, keys, what it does
        buttons = (
            ("‹ Previous", self.tr("‹ Previous"), "Left", lambda: self.show_index(self.index - 1)),
            ("Next ›", self.tr("Next ›"), "Right", lambda: self.show_index(self.index + 1)),
            ("Fit", self.tr("Fit"), "F", self.fit),
            ("100%", "100%", "1", lambda: self.set_zoom(1.0)),
            ("−", "−", "Ctrl+-", lambda: self.set_zoom(self._zoom_now() / ZOOM_STEP)),
            ("+", "+", "Ctrl+=", lambda: self.set_zoom(self._zoom_now() * ZOOM_STEP)),
            ("Copy", self.tr("Copy"), "Ctrl+C", self.copy),
            ("Show in folder", self.tr("Show in folder"), "Ctrl+Shift+O", self.show_in_folder),
            ("Open file", self.tr("Open file"), "Ctrl+O", self.open_file),
            ("Compare", self.tr("Compare"), "C", self.toggle_compare),
        )
        self.buttons: dict[str, QPushButton] = {}
        for name, text, keys, slot in buttons:
            button = QPushButton(text)
            button.setToolTip(keys)
            button.clicked.connect(slot)
            QShortcut(QKeySequence(keys), self, slot)
            bar.addWidget(button)
            self.buttons[name] = button
        QShortcut(QKeySequence("+"), self, self.buttons["+"].click)
        QShortcut(QKeySequence("-"), self, self.buttons["−"].click)
        self.buttons["Compare"].setCheckable(True)
        self.buttons["Compare"].setToolTip(
            self.tr("Keep this image on the left and go through the others beside it (C)")
        )
        layout = QVBoxLayout(self)
        layout.addWidget(self.split, 1)
        layout.addWidget(self.caption)
        layout.addLayout(bar)

    @property
    def path(self) -> str:
        return self.paths[self.index]

    def show_index(self, index: int) -> None:
        if not 0 <= index < len(self.paths):
            return
        self.index = index
        self.image = QImage(self.path)
        self.buttons["‹ Previous"].setEnabled(index > 0)
        self.buttons["Next ›"].setEnabled(index < len(self.paths) - 1)
        if self.image.isNull():
            self.picture.setText(
                self.tr("The image file is missing or unreadable:\n{path}").format(path=self.path)
            )
        self.details.setPlainText(png_parameters(self.path) or self.tr("No settings in this file"))
        self._render()

    def toggle_compare(self) -> None:
        """Pin the image shown on the left (or let it go): two results side by side."""
        if self.pinned is None and not self.image.isNull():
            self.pinned, self.pinned_path = QImage(self.image), self.path
        else:
            self.pinned, self.pinned_path = None, ""
        on = self.pinned is not None
        self.buttons["Compare"].setChecked(on)
        self.left.setVisible(on)
        if on:
            room = self.split.width() - self.details.width()
            self.split.setSizes([room // 2, room - room // 2, self.details.width()])
        self._render()

    def fit(self) -> None:
        self.zoom = None
        self._render()

    def set_zoom(self, zoom: float) -> None:
        self.zoom = min(MAX_ZOOM, max(0.05, zoom))
        self._render()

    def _zoom_now(self) -> float:
        if self.zoom is not None or self.image.isNull():
            return self.zoom or 1.0
        room = self.area.viewport().size()
        return min(room.width() / self.image.width(), room.height() / self.image.height())

    def _render(self) -> None:
        if self.image.isNull():
            return
        zoom = self._zoom_now()
        size = self.image.size() * zoom
        # Small images grow pixel by pixel (sharp), large ones shrink smoothly.
        mode = (
            Qt.TransformationMode.FastTransformation
            if zoom >= 2
            else Qt.TransformationMode.SmoothTransformation
        )
        scaled = self.image.scaled(size, Qt.AspectRatioMode.KeepAspectRatio, mode)
        self.picture.setPixmap(QPixmap.fromImage(scaled))
        if self.pinned is not None:  # the same scale on both sides: a fair comparison
            pinned = self.pinned.scaled(
                self.pinned.size() * zoom, Qt.AspectRatioMode.KeepAspectRatio, mode
            )
            self.left.setPixmap(QPixmap.fromImage(pinned))
            self.left.setToolTip(self.pinned_path)
        how = self.tr("fit {zoom}") if self.zoom is None else self.tr("zoom {zoom}")
        place = self.tr("{n} of {count}").format(n=self.index + 1, count=len(self.paths))
        self.caption.setText(
            f"{Path(self.path).name} · {self.image.width()}×{self.image.height()} · "
            f"{how.format(zoom=f'{zoom:.0%}')} · {place}"
        )

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.zoom is None:
            self._render()

    def copy(self) -> None:
        if not self.image.isNull():
            QGuiApplication.clipboard().setImage(self.image)

    def show_in_folder(self) -> None:
        """The file selected in the file manager (or at least its folder opened)."""
        self.file_manager.show_in_folder(self.path)

    def open_file(self) -> None:
        self._open(Path(self.path))

    def _open(self, path: Path) -> None:
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))):
            self.problem.emit(self.tr("Could not open {path}").format(path=path))


def png_parameters(path: str) -> str:
    """The generation settings a PNG carries (A1111's `parameters` text; Easel writes it
    too), line breaks kept (Qt's reader folds them); "" if there are none, and the reason
    if they are too long to read (the file may come from anyone: read within a limit)."""
    from app.engine.jobs.image_text import UnreadableImage, read_image_text

    try:
        found = read_image_text(Path(path))
    except UnreadableImage:
        return ""
    if A1111_KEY in found.refused and A1111_KEY not in found.texts:
        return f"{Path(path).name}: {found.refused[A1111_KEY]}"
    return found.texts.get(A1111_KEY, "").strip()
