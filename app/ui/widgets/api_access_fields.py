"""Settings' rows about who may use the window's HTTP API: its token (shown, copyable), the
host names it answers to, and whether A1111 clients may go without the token."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLineEdit, QPushButton, QWidget

from app.engine.api_access import read_token
from app.engine.settings import Settings


class TokenField(QWidget):
    """The stored token, read-only, with a button that copies it."""

    def __init__(self, token: str | None) -> None:
        super().__init__()
        self.edit = QLineEdit(token or "")
        self.edit.setObjectName("api-token")
        self.edit.setReadOnly(True)
        self.edit.setPlaceholderText(self.tr("made when the API first starts"))
        self.copy = QPushButton(self.tr("Copy"))
        self.copy.setEnabled(bool(token))
        self.copy.clicked.connect(self._copy)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.copy)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.edit.text())


class ApiAccessFields(QObject):
    """The widgets; the dialog lays them out in its form."""

    def __init__(self, settings: Settings, token: str | None = None) -> None:
        super().__init__()
        self.token = TokenField(token if token is not None else read_token())
        self.token.setToolTip(self.tr("Programs send it as: Authorization: Bearer <token>"))
        self.hosts = QLineEdit(", ".join(settings.api_allowed_hosts))
        self.hosts.setPlaceholderText(self.tr("e.g. easel.lan, separated by commas"))
        self.hosts.setToolTip(self.tr("Other names the API answers to; any other is refused"))
        self.a1111_open = QCheckBox(self.tr("A1111 clients without the token (this computer only)"))
        self.a1111_open.setChecked(settings.api_a1111_without_token)
        self.a1111_open.setToolTip(self.tr("For A1111 clients that cannot send a token"))

    def chosen(self) -> dict[str, Any]:
        """The settings these rows hold (checked by `Settings.validated`)."""
        names = tuple(
            n.strip() for n in self.hosts.text().replace(" ", ",").split(",") if n.strip()
        )
        return {"api_allowed_hosts": names,
                "api_a1111_without_token": self.a1111_open.isChecked()}  # fmt: skip
