"""The mask editor's canvas: a picture with a mask painted over it, brush and eraser with a
size and a hardness, undo/redo, invert, clear, zoom and pan.

The mask is one ARGB layer the size of the picture whose alpha is the mask (255: repaint);
a stroke paints soft round dabs into it and repaints only the widget area it touched, so a
2048x2048 picture paints as fast as a small one (benchmarks/gui.py, mask_editor_max_stall_ms).
The stored mask is that alpha channel as a greyscale PNG (`mask_png`).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QIODevice,
    QPoint,
    QPointF,
    QRect,
    QRectF,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QColor,
    QImage,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QRadialGradient,
    QWheelEvent,
)
from PySide6.QtWidgets import QSizePolicy, QWidget

MIN_BRUSH, MAX_BRUSH, DEFAULT_BRUSH = 1, 512, 32
MAX_UNDO = 30
MASK_COLOUR = QColor(255, 40, 60)
ZOOM_STEP, MIN_ZOOM, MAX_ZOOM = 1.25, 0.05, 32.0


class MaskCanvas(QWidget):
    changed = Signal()  # the mask changed (a stroke ended, undo, invert, clear, ...)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.picture = QImage()
        self.shown = QImage()  # what is drawn under the mask: the picture or a result
        self.layer = QImage()
        self.brush_size = DEFAULT_BRUSH
        self.hardness = 0.8  # 1: a hard edge, 0: soft all the way from the centre
        self.erasing = False
        self.opacity = 0.5
        self.mask_visible = True
        self.zoom = 1.0
        self.offset = QPointF(0, 0)  # where the picture's corner is, in widget pixels
        self._undo: list[QImage] = []
        self._redo: list[QImage] = []
        self._last: QPointF | None = None
        self._pan_from: QPointF | None = None
        self._empty: bool | None = True  # None: not known since the last edit

    # --- the picture and the mask -------------------------------------------------------------

    def set_picture(self, picture: QImage) -> None:
        self.picture = picture.convertToFormat(QImage.Format.Format_RGB32)
        self.shown = self.picture
        self.layer = QImage(self.picture.size(), QImage.Format.Format_ARGB32_Premultiplied)
        self.layer.fill(Qt.GlobalColor.transparent)
        self._undo.clear()
        self._redo.clear()
        self._empty = True
        self.fit()

    def show_picture(self, image: QImage) -> None:
        """Draw `image` (the same size: a result) under the mask instead of the picture."""
        self.shown = image.convertToFormat(QImage.Format.Format_RGB32)
        self.update()

    def mask_image(self) -> QImage:
        """The mask as greyscale: 255 where to repaint."""
        alpha = self.layer.convertToFormat(QImage.Format.Format_Alpha8)
        bits = bytes(alpha.constBits())  # a copy, while `alpha` lives
        grey = QImage(bits, alpha.width(), alpha.height(), alpha.bytesPerLine(),
                      QImage.Format.Format_Grayscale8)  # fmt: skip
        return grey.copy()  # owns its pixels: `bits` may go

    def mask_png(self) -> bytes:
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        self.mask_image().save(buffer, "PNG")  # type: ignore[call-overload]  # the stubs want bytes; Qt a str
        return bytes(data.data())

    def load_mask(self, mask: QImage) -> None:
        """Use `mask` (greyscale, the picture's size: 255 repaints) as the mask; undoable."""
        self._remember()
        layer = QImage(self.picture.size(), QImage.Format.Format_ARGB32_Premultiplied)
        layer.fill(MASK_COLOUR)
        layer.setAlphaChannel(mask.convertToFormat(QImage.Format.Format_Grayscale8))
        self.layer = layer
        self._edited()

    def is_empty(self) -> bool:
        """Nothing painted (nothing to repaint)."""
        if self.layer.isNull():
            return True
        if self._empty is None:  # alpha is every 4th byte of ARGB32 (little-endian BGRA)
            self._empty = not np.frombuffer(self.layer.constBits(), np.uint8)[3::4].any()
        return self._empty

    # --- editing ------------------------------------------------------------------------------

    def set_brush_size(self, size: int) -> None:
        self.brush_size = max(MIN_BRUSH, min(MAX_BRUSH, size))
        self.update()

    def grow_brush(self, factor: float) -> None:
        size = round(self.brush_size * factor)  # at least a pixel either way, small or not
        step = max(size, self.brush_size + 1) if factor > 1 else min(size, self.brush_size - 1)
        self.set_brush_size(step)

    def invert(self) -> None:
        self._remember()
        full = QImage(self.layer.size(), self.layer.format())
        full.fill(MASK_COLOUR)
        painter = QPainter(full)
        painter.setCompositionMode(QPainter.CompositionMode.CompositionMode_DestinationOut)
        painter.drawImage(0, 0, self.layer)
        painter.end()
        self.layer = full
        self._edited()

    def clear(self) -> None:
        self._remember()
        self.layer.fill(Qt.GlobalColor.transparent)
        self._edited()

    def undo(self) -> None:
        if self._undo:
            self._redo.append(self.layer.copy())
            self.layer = self._undo.pop()
            self._edited()

    def redo(self) -> None:
        if self._redo:
            self._undo.append(self.layer.copy())
            self.layer = self._redo.pop()
            self._edited()

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    @property
    def can_redo(self) -> bool:
        return bool(self._redo)

    def _remember(self) -> None:
        self._undo.append(self.layer.copy())
        del self._undo[:-MAX_UNDO]
        self._redo.clear()

    def _edited(self) -> None:
        self._empty = None
        self.update()
        self.changed.emit()

    # --- zoom and pan -------------------------------------------------------------------------

    def fit(self) -> None:
        if self.picture.isNull() or self.width() < 2 or self.height() < 2:
            return
        self.zoom = min(self.width() / self.picture.width(), self.height() / self.picture.height())
        shown = QPointF(self.picture.width() * self.zoom, self.picture.height() * self.zoom)
        self.offset = QPointF((self.width() - shown.x()) / 2, (self.height() - shown.y()) / 2)
        self.update()

    def zoom_by(self, factor: float, around: QPointF | None = None) -> None:
        centre = around if around is not None else QPointF(self.width() / 2, self.height() / 2)
        spot = self.to_image(centre)
        self.zoom = max(MIN_ZOOM, min(MAX_ZOOM, self.zoom * factor))
        self.offset = centre - spot * self.zoom
        self.update()

    def to_image(self, point: QPointF) -> QPointF:
        return (point - self.offset) / self.zoom

    def to_widget(self, rect: QRectF) -> QRect:
        return QRectF(
            rect.topLeft() * self.zoom + self.offset, rect.size() * self.zoom
        ).toAlignedRect()

    # --- events -------------------------------------------------------------------------------

    def resizeEvent(self, event: object) -> None:
        self.fit()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.MiddleButton or (
            event.button() == Qt.MouseButton.LeftButton
            and event.modifiers() & Qt.KeyboardModifier.AltModifier
        ):
            self._pan_from = event.position()
            return
        if event.button() == Qt.MouseButton.LeftButton and not self.layer.isNull():
            self._remember()
            self._last = self.to_image(event.position())
            self._dab_line(self._last, self._last)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._pan_from is not None:
            self.offset += event.position() - self._pan_from
            self._pan_from = event.position()
            self.update()
        elif self._last is not None:
            point = self.to_image(event.position())
            self._dab_line(self._last, point)
            self._last = point

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._pan_from is not None:
            self._pan_from = None
        elif self._last is not None:
            self._last = None
            self.changed.emit()

    def wheelEvent(self, event: QWheelEvent) -> None:
        factor = ZOOM_STEP if event.angleDelta().y() > 0 else 1 / ZOOM_STEP
        self.zoom_by(factor, event.position())

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.fillRect(event.rect(), QColor(40, 40, 44))
        if self.shown.isNull():
            return
        # Only what is exposed: the source rectangle of the picture behind the dirty area.
        exposed = QRectF(event.rect())
        source = QRectF(self.to_image(exposed.topLeft()), exposed.size() / self.zoom)
        source = source.intersected(QRectF(self.shown.rect()))
        if source.isEmpty():
            return
        target = QRectF(source.topLeft() * self.zoom + self.offset, source.size() * self.zoom)
        painter.drawImage(target, self.shown, source)
        if self.mask_visible:
            painter.setOpacity(self.opacity)
            painter.drawImage(target, self.layer, source)

    # --- painting -----------------------------------------------------------------------------

    def _dab_line(self, start: QPointF, end: QPointF) -> None:
        """Round dabs from `start` to `end` (image pixels), a quarter of the size apart."""
        radius = self.brush_size / 2
        spacing = max(1.0, radius / 4)
        delta = end - start
        length = (delta.x() ** 2 + delta.y() ** 2) ** 0.5
        count = max(1, int(length / spacing))
        painter = QPainter(self.layer)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        if self.erasing:
            painter.setCompositionMode(QPainter.CompositionMode.CompositionMode_DestinationOut)
        for index in range(count + 1 if length else 1):
            centre = start + delta * (index / count)
            painter.setBrush(self._brush(centre, radius))
            painter.drawEllipse(centre, radius, radius)
        painter.end()
        self._empty = None if self.erasing else False  # a brush dab always leaves some mask
        left, right = min(start.x(), end.x()) - radius, max(start.x(), end.x()) + radius
        top, bottom = min(start.y(), end.y()) - radius, max(start.y(), end.y()) + radius
        self.update(
            self.to_widget(QRectF(left, top, right - left, bottom - top)).adjusted(-2, -2, 2, 2)
        )

    def _brush(self, centre: QPointF, radius: float) -> QRadialGradient:
        gradient = QRadialGradient(centre, radius)
        solid = QColor(MASK_COLOUR)
        clear = QColor(MASK_COLOUR)
        clear.setAlpha(0)
        gradient.setColorAt(0.0, solid)
        gradient.setColorAt(min(0.999, max(0.0, self.hardness)), solid)
        gradient.setColorAt(1.0, clear)
        return gradient


def widget_point(canvas: MaskCanvas, image_point: QPointF) -> QPoint:
    """Where an image pixel is on the canvas (for tests and scripted strokes)."""
    return (image_point * canvas.zoom + canvas.offset).toPoint()
