"""Where the main window's panels sit: the prompt on the left, the image over the gallery
in the middle, the job list over the timeline on the right, and the banners floating over
the image area.

The splitters' object names are the keys their sizes are remembered under
(`qt/window_state.py`): renaming one forgets the user's layout.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMainWindow, QSplitter, QVBoxLayout, QWidget

from app.ui.widgets.banner import Banner, BannerStack

RIGHT_SIZES = [520, 320]  # the job list over the timeline, before the user moves the handle


def lay_out(
    window: QMainWindow,
    prompt: QWidget,
    middle: Sequence[QWidget],
    right: Sequence[QWidget],
    banners: Sequence[Banner],
) -> tuple[QSplitter, BannerStack]:
    """Put the panels in `window`; its main splitter and the stack of floating banners.

    `middle`: the image (it takes the spare height) over the gallery; `right`: the job list
    over the timeline."""
    center = _column(middle)
    side = _vsplit("right", *right)
    side.setSizes(RIGHT_SIZES)
    splitter = QSplitter(Qt.Orientation.Horizontal)
    splitter.setObjectName("main")
    for widget in (prompt, center, side):
        splitter.addWidget(widget)
    splitter.setStretchFactor(1, 1)
    splitter.setCollapsible(1, False)
    body = QWidget()
    layout = QVBoxLayout(body)
    layout.setContentsMargins(10, 8, 10, 8)
    layout.setSpacing(8)
    layout.addWidget(splitter, 1)
    window.setCentralWidget(body)
    # Over the image area, not above the panels: a banner coming or going never moves the
    # layout, and never hides the form, the filters or the job list.
    return splitter, BannerStack(center, banners)


def _column(widgets: Sequence[QWidget]) -> QWidget:
    """`widgets` one over the other; the first takes the spare height."""
    column = QWidget()
    layout = QVBoxLayout(column)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(8)
    for i, widget in enumerate(widgets):
        layout.addWidget(widget, 1 if i == 0 else 0)
    return column


def _vsplit(name: str, *widgets: QWidget) -> QSplitter:
    splitter = QSplitter(Qt.Orientation.Vertical)
    splitter.setObjectName(name)
    for widget in widgets:
        splitter.addWidget(widget)
    splitter.setStretchFactor(0, 1)
    splitter.setCollapsible(0, False)
    return splitter
