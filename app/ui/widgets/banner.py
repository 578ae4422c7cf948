"""A thin, non-blocking strip at the top of the window: restore news, errors, notes."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget


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
