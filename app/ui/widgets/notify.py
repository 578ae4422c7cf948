"""Desktop notifications through the system tray, when there is one."""

from __future__ import annotations

import logging

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QSystemTrayIcon, QWidget

from app.engine.jobs.states import JobStatus
from app.ui.presenters.i18n import translate
from app.ui.presenters.rows import JobRow, status_label

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
        return translate("Notifier", "Image ready"), prompt
    if row.status in (JobStatus.FAILED, JobStatus.TIMEOUT):
        if row.status is JobStatus.FAILED:
            title = translate("Notifier", "Job {id} failed")
        else:
            title = translate("Notifier", "Job {id} timed out")
        return title.format(id=row.id), f"{prompt}\n{row.error or status_label(row.status)}"
    return "", ""
