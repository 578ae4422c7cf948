"""Desktop notifications through the system tray, when there is one."""

from __future__ import annotations

import logging

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QSystemTrayIcon, QWidget

from app.engine.states import JobStatus
from app.ui.presenters.rows import JobRow

log = logging.getLogger(__name__)


class Notifier:
    def __init__(self, icon: QIcon, parent: QWidget | None = None) -> None:
        self.tray: QSystemTrayIcon | None = None
        if QSystemTrayIcon.isSystemTrayAvailable():
            self.tray = QSystemTrayIcon(icon, parent)
            self.tray.setToolTip("Easel")
            self.tray.show()
        self.sent: list[tuple[str, str]] = []  # what was announced (tests read it)

    def job_settled(self, row: JobRow) -> None:
        title, text = describe(row)
        if title:
            self.notify(title, text)

    def notify(self, title: str, text: str) -> None:
        self.sent.append((title, text))
        if self.tray is None:
            log.info("%s: %s", title, text)
            return
        icon = QSystemTrayIcon.MessageIcon.Information
        self.tray.showMessage(title, text, icon, 5000)

    def hide(self) -> None:
        if self.tray is not None:
            self.tray.hide()


def describe(row: JobRow) -> tuple[str, str]:
    """Title and text for a settled job; empty title for news not worth a notification."""
    prompt = row.prompt if len(row.prompt) <= 60 else row.prompt[:57] + "…"
    if row.status is JobStatus.SUCCESS:
        return "Image ready", prompt
    if row.status in (JobStatus.FAILED, JobStatus.TIMEOUT):
        reason = row.error or row.status.value.lower()
        return f"Job {row.id} {row.status.value.lower()}", f"{prompt}\n{reason}"
    return "", ""
