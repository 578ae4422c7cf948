"""Render resources/icons/easel.svg to the PNG sizes desktops ask for.

QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/make_icons.py
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ICONS = Path(__file__).resolve().parents[1] / "resources" / "icons"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def render(svg: Path, size: int, out: Path) -> None:
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    QSvgRenderer(str(svg)).render(painter)
    painter.end()
    if not image.save(str(out)):
        raise OSError(f"could not write {out}")


def main() -> None:
    QGuiApplication([])
    for size in SIZES:
        render(ICONS / "easel.svg", size, ICONS / f"easel-{size}.png")
        print(f"wrote: {ICONS / f'easel-{size}.png'}")


if __name__ == "__main__":
    main()
