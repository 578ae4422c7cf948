"""The app icon (the packaged PNGs, or a drawn stand-in) and small drawn icons."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QLinearGradient, QPainter, QPixmap

from app.engine.paths import resources_dir


def app_icon() -> QIcon:
    """resources/icons/easel-<size>.png (made by packaging/make_icons.py) when present."""
    icon = QIcon()
    for path in sorted((resources_dir() / "icons").glob("easel-*.png")):
        icon.addFile(str(path))
    if icon.isNull():  # a source tree without the rendered icons still gets one
        for size in (16, 32, 64, 128, 256):
            icon.addPixmap(_draw(size))
    return icon


def _draw(size: int) -> QPixmap:
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    gradient = QLinearGradient(QPointF(0, 0), QPointF(size, size))
    gradient.setColorAt(0, QColor("#8b7cf6"))
    gradient.setColorAt(1, QColor("#3b82f6"))
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(gradient)
    painter.drawRoundedRect(QRectF(0, 0, size, size), size * 0.22, size * 0.22)
    # Three paint dabs: an easel's palette.
    for (x, y), colour in (
        ((0.32, 0.36), "#fde68a"),
        ((0.62, 0.32), "#fca5a5"),
        ((0.46, 0.64), "#86efac"),
    ):
        painter.setBrush(QColor(colour))
        painter.drawEllipse(QPointF(x * size, y * size), size * 0.13, size * 0.13)
    painter.end()
    return pixmap


def dice_icon(size: int = 18) -> QIcon:
    """A die showing five: drawn, since emoji fonts are not everywhere."""
    pixmap = QPixmap(size * 2, size * 2)
    pixmap.setDevicePixelRatio(2.0)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor("#e6e8eb"))
    painter.drawRoundedRect(QRectF(1, 1, size - 2, size - 2), size * 0.22, size * 0.22)
    painter.setBrush(QColor("#16181d"))
    pip = size * 0.09
    for x, y in ((0.28, 0.28), (0.72, 0.28), (0.5, 0.5), (0.28, 0.72), (0.72, 0.72)):
        painter.drawEllipse(QPointF(x * size, y * size), pip, pip)
    painter.end()
    return QIcon(pixmap)
