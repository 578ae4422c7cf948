"""Where the main window's panels sit: the prompt on the left, the image over the gallery
in the middle, the job list over the timeline on the right, and the banners floating over
the image area.

The splitters' object names are the keys their sizes are remembered under
(`qt/window_state.py`): renaming one forgets the user's layout.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QMainWindow, QScrollArea, QSplitter, QVBoxLayout, QWidget

from app.ui.widgets.banner import Banner, BannerStack

RIGHT_SIZES = [520, 320]  # the job list over the timeline, before the user moves the handle
MIN_JOBS_WIDTH = 380  # the job list's prompt, status and progress still read at this width


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
    side.setMinimumWidth(MIN_JOBS_WIDTH)
    splitter = QSplitter(Qt.Orientation.Horizontal)
    splitter.setObjectName("main")
    for widget in (scrolling(prompt), center, side):
        splitter.addWidget(widget)
    splitter.setStretchFactor(1, 1)
    splitter.setStretchFactor(2, 1)  # a wider window widens the job list too, not only the image
    # The form and the job list may be dragged shut (their handle brings them back); the
    # image stays. Each panel's minimum is small, so every handle moves on a laptop screen.
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


def scrolling(panel: QWidget) -> QScrollArea:
    """`panel` in a vertical scroll area: on a 768 px high screen the form scrolls instead
    of setting the window's minimum height."""
    area = QScrollArea()
    area.setObjectName(f"{panel.objectName() or 'panel'}Scroll")
    area.setWidget(panel)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    bar = area.verticalScrollBar().sizeHint().width()
    area.setMinimumWidth(panel.minimumSizeHint().width() + bar)
    return area


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
