"""Settings' rows about who may use the window's HTTP API: its token (shown, copyable), the
host names it answers to, and whether A1111 clients may go without the token."""

from __future__ import annotations

from typing import Any

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


class ApiAccessFields:
    """The widgets; the dialog lays them out in its form."""

    def __init__(self, settings: Settings, token: str | None = None) -> None:
        self.token = TokenField(token if token is not None else read_token())
        self.token.setToolTip(
            self.token.tr("Programs send it as `Authorization: Bearer <token>` (A1111 clients: "
                          "as the password); it is kept in the data folder, not in settings")
        )  # fmt: skip
        self.hosts = QLineEdit(", ".join(settings.api_allowed_hosts))
        self.hosts.setPlaceholderText(self.token.tr("e.g. easel.lan (separate with commas)"))
        self.hosts.setToolTip(
            self.token.tr("Names the API answers to besides 127.0.0.1 and localhost (a reverse "
                          "proxy's); requests naming any other host are refused")
        )  # fmt: skip
        self.a1111_open = QCheckBox(
            self.token.tr("A1111 clients without the token (this computer only)")
        )
        self.a1111_open.setChecked(settings.api_a1111_without_token)
        self.a1111_open.setToolTip(
            self.token.tr("For A1111 clients that cannot send a token: /sdapi answers them "
                          "without it on 127.0.0.1; other sites' pages are still refused")
        )  # fmt: skip

    def chosen(self) -> dict[str, Any]:
        """The settings these rows hold (checked by `Settings.validated`)."""
        names = tuple(
            n.strip() for n in self.hosts.text().replace(" ", ",").split(",") if n.strip()
        )
        return {"api_allowed_hosts": names,
                "api_a1111_without_token": self.a1111_open.isChecked()}  # fmt: skip
