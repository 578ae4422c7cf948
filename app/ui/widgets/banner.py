"""Thin strips over the top of the window: restore news, undo, errors (every error, in red)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)


class Banner(QFrame):
    def __init__(self, kind: str = "info", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.setProperty("kind", kind)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(12, 6, 6, 6)
        self._layout.setSpacing(8)
        self._layout.addWidget(self.label, 1)
        self._buttons: list[QPushButton] = []
        close = QToolButton()
        close.setText("✕")
        close.setToolTip(self.tr("Dismiss"))
        close.clicked.connect(self.hide)
        self._close = close
        self._layout.addWidget(close)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)
        self.hide()

    def add_action(self, text: str, callback: Callable[[], None]) -> QPushButton:
        button = QPushButton(text)
        button.clicked.connect(callback)
        self._layout.insertWidget(self._layout.count() - 1, button)
        self._buttons.append(button)
        return button

    def clear_actions(self) -> None:
        for button in self._buttons:
            button.deleteLater()
        self._buttons.clear()

    def show_text(self, text: str, *, hide_after_ms: int = 0) -> None:
        self.label.setText(text)
        self.show()
        if hide_after_ms:
            self._timer.start(hide_after_ms)
        else:
            self._timer.stop()


class BannerStack(QWidget):
    """Banners floating over the top of `host`: showing one never moves the panels below.

    The stack is a child of `host` outside its layout, kept across its width and as tall as
    the banners showing (zero when none is, so it never takes a click meant for below).
    """

    MARGIN = 10

    def __init__(self, host: QWidget, banners: Sequence[Banner]) -> None:
        super().__init__(host)
        self.setObjectName("bannerStack")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        for banner in banners:
            layout.addWidget(banner)
            banner.installEventFilter(self)
        host.installEventFilter(self)
        self._host = host
        self.place()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.Show, QEvent.Type.Hide, QEvent.Type.Resize):
            self.place()
        return False

    def place(self) -> None:
        width = max(0, self._host.width() - 2 * self.MARGIN)
        layout = self.layout()
        assert layout is not None
        showing = any(banner.isVisibleTo(self) for banner in self.findChildren(Banner))
        height = layout.heightForWidth(width) if showing else 0
        if height < 0:
            height = layout.sizeHint().height()
        self.setGeometry(self.MARGIN, self.MARGIN // 2, width, height)
        self.raise_()
