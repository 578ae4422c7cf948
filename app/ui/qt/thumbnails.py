"""Small pixmaps of finished images, loaded off the GUI thread and cached by path."""

from __future__ import annotations

from collections import OrderedDict

from PySide6.QtCore import QObject, QSize, Qt, Signal
from PySide6.QtGui import QImage, QImageReader, QPixmap

from app.ui.qt.dbthread import Runner

THUMB_SIDE = 96
MAX_CACHED = 600


def load_image(path: str, max_side: int | None = None) -> QImage:
    """Read an image (scaled down while decoding when it is large); null image on failure."""
    reader = QImageReader(path)
    reader.setAutoTransform(True)
    size = reader.size()
    if max_side and size.isValid() and max(size.width(), size.height()) > max_side:
        reader.setScaledSize(
            size.scaled(QSize(max_side, max_side), Qt.AspectRatioMode.KeepAspectRatio)
        )
    return reader.read()


def thumbnail(image: QImage, side: int = THUMB_SIDE) -> QImage:
    if image.isNull():
        return image
    # Smooth in both directions: a 64 px image shown at 96 px looks soft, not blocky.
    return image.scaled(
        side, side, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
    )


class ThumbnailCache(QObject):
    loaded = Signal(str)

    def __init__(self, runner: Runner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._cache: OrderedDict[str, QPixmap | None] = OrderedDict()
        self._loading: set[str] = set()

    def get(self, path: str) -> QPixmap | None:
        """The thumbnail if ready; otherwise start loading it and return None."""
        if path in self._cache:
            self._cache.move_to_end(path)
            return self._cache[path]
        if path not in self._loading:
            self._loading.add(path)
            self._runner.run(
                lambda: thumbnail(load_image(path, THUMB_SIDE * 2)),
                lambda image: self._store(path, image),
                lambda _error: self._store(path, QImage()),
            )
        return None

    def _store(self, path: str, image: QImage) -> None:
        self._loading.discard(path)
        self._cache[path] = None if image.isNull() else QPixmap.fromImage(image)
        while len(self._cache) > MAX_CACHED:
            self._cache.popitem(last=False)
        self.loaded.emit(path)
