"""Thin strips over the top of the window: restore news, undo, errors (every error, in red)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.widgets.flow_layout import FlowLayout


class Banner(QFrame):
    def __init__(self, kind: str = "info", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.setProperty("kind", kind)
        self.label = QLabel()
        self.label.setWordWrap(True)
        # The text and ✕ on top, the buttons under it, wrapping: over a narrow image area
        # (a laptop's) they stay whole instead of being squeezed beside the text.
        outer = QVBoxLayout(self)
        outer.setContentsMargins(12, 6, 6, 6)
        outer.setSpacing(6)
        top = QHBoxLayout()
        top.setSpacing(8)
        top.addWidget(self.label, 1)
        self._buttons: list[QPushButton] = []
        close = QToolButton()
        close.setText("✕")
        close.setToolTip(self.tr("Dismiss"))
        close.clicked.connect(self.hide)
        self._close = close
        top.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        outer.addLayout(top)
        self._actions = QWidget()
        self._layout = FlowLayout(self._actions)
        self._actions.hide()
        outer.addWidget(self._actions)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)
        self.hide()

    def add_action(self, text: str, callback: Callable[[], None]) -> QPushButton:
        button = QPushButton(text)
        button.clicked.connect(callback)
        self._layout.addWidget(button)
        self._buttons.append(button)
        self._actions.show()
        return button

    def clear_actions(self) -> None:
        for button in self._buttons:
            self._layout.removeWidget(button)
            button.deleteLater()
        self._buttons.clear()
        self._actions.hide()

    def show_text(self, text: str, *, hide_after_ms: int = 0) -> None:
        self.label.setText(text)
        self.show()
        if hide_after_ms:
            self._timer.start(hide_after_ms)
        else:
            self._timer.stop()


class BannerStack(QWidget):
    """Banners floating over the top of `host`: showing one never moves the panels around.

    The stack is a child of `host` outside its layout, kept across its width and as tall as
    the banners showing (zero when none is, so it never takes a click meant for below).
    """

    MARGIN = 10
    SPACING = 6

    def __init__(self, host: QWidget, banners: Sequence[Banner]) -> None:
        super().__init__(host)
        self.setObjectName("bannerStack")
        # Placed by hand, not by a layout: a layout here resized the banners a turn of the
        # event loop late, and their buttons and text sat in a zero-height strip meanwhile.
        self._banners = list(banners)
        for banner in self._banners:
            banner.setParent(self)
            banner.installEventFilter(self)
        host.installEventFilter(self)
        self._host = host
        self.place()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # The host's width, a banner coming or going, or one showing a new text (LayoutRequest).
        watched_events = _HOST_EVENTS if watched is self._host else _BANNER_EVENTS
        if event.type() in watched_events:
            self.place()
        return False

    def place(self) -> None:
        """Each banner showing as tall as its wrapped text needs, one under the other."""
        width = max(0, self._host.width() - 2 * self.MARGIN)
        y = 0
        for banner in self._banners:
            if banner.isVisibleTo(self):
                height = _height_for(banner, width)
                banner.setGeometry(0, y, width, height)
                y += height + self.SPACING
        self.setGeometry(self.MARGIN, self.MARGIN // 2, width, max(0, y - self.SPACING))
        self.raise_()


_HOST_EVENTS = frozenset({QEvent.Type.Resize})
_BANNER_EVENTS = frozenset({QEvent.Type.Show, QEvent.Type.Hide, QEvent.Type.LayoutRequest})


def _height_for(widget: QWidget, width: int) -> int:
    layout = widget.layout()
    if layout is not None and layout.hasHeightForWidth():
        return max(layout.heightForWidth(width), layout.minimumSize().height())
    return widget.sizeHint().height()
