"""Small pixmaps of finished outputs, loaded off the GUI thread and cached by path.

What a thumbnail is made from is the output kind's to say (`OutputKind.still`): an image's
own file, read scaled down while decoding, or the picture's bytes another kind gives."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QObject, QSize, Qt, Signal
from PySide6.QtGui import QImage, QImageReader, QPixmap

from app.engine.outputs.kinds import OutputKind
from app.ui.qt.dbthread import Runner

THUMB_SIDE = 96
MAX_CACHED = 600


def load_still(kind: OutputKind | None, path: str, max_side: int | None = None) -> QImage:
    """The picture that shows a `kind` output at `path` (scaled down while decoding when it
    is large); a null image on failure, and for a kind this Easel does not make."""
    if kind is None:
        return QImage()
    source = kind.still(Path(path))
    if isinstance(source, Path):
        return load_image(str(source), max_side)
    buffer = QBuffer()
    buffer.setData(QByteArray(source))
    buffer.open(QIODevice.OpenModeFlag.ReadOnly)
    return _read(QImageReader(buffer), max_side)


def load_image(path: str, max_side: int | None = None) -> QImage:
    """Read an image (scaled down while decoding when it is large); null image on failure."""
    return _read(QImageReader(path), max_side)


def _read(reader: QImageReader, max_side: int | None) -> QImage:
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

    def get(self, path: str, kind: OutputKind | None) -> QPixmap | None:
        """The thumbnail of the `kind` output at `path` if ready; otherwise start loading it
        and return None."""
        if path in self._cache:
            self._cache.move_to_end(path)
            return self._cache[path]
        if path not in self._loading:
            self._loading.add(path)
            self._runner.run(
                lambda: thumbnail(load_still(kind, path, THUMB_SIDE * 2)),
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
