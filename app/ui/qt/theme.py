"""Colours shared by the style sheet, the delegates and the drawings, and the QSS loader."""

from __future__ import annotations

import contextlib
from pathlib import Path

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

from app.engine.jobs.states import JobStatus
from app.engine.paths import resources_dir

# Hues chosen to read at a glance on a dark background and to stay apart for common
# colour-vision deficiencies: running is blue, done green, trouble red/orange, held amber.
STATUS_COLOURS: dict[JobStatus, str] = {
    JobStatus.PENDING: "#7d8590",
    JobStatus.PROCESSING: "#3b82f6",
    JobStatus.CANCELLING: "#f97316",
    JobStatus.PAUSING: "#eab308",
    JobStatus.PAUSED: "#ca8a04",
    JobStatus.SUCCESS: "#22a06b",
    JobStatus.FAILED: "#e5484d",
    JobStatus.TIMEOUT: "#d9467a",
    JobStatus.CANCELLED: "#5b6270",
    JobStatus.BLOCKED: "#8b5cf6",  # waits for its parent jobs
}

BACKGROUND = "#16181d"
SURFACE = "#1e2128"
CANVAS = "#101216"
TEXT = "#e6e8eb"
MUTED = "#9aa1ab"
ACCENT = "#7c6cf2"


def status_colour(status: JobStatus) -> QColor:
    return QColor(STATUS_COLOURS[status])


def style_sheet_path() -> Path:
    return resources_dir() / "style" / "dark.qss"


def apply_theme(app: QApplication) -> None:
    """Fusion + our QSS: Fusion draws consistently on every platform, the QSS tints it."""
    app.setStyle("Fusion")
    with contextlib.suppress(OSError):  # an unstyled window is still a working window
        app.setStyleSheet(style_sheet())


def style_sheet() -> str:
    """The QSS with `@ICONS@` made the icons folder (a url() is read from the working folder)."""
    icons = (resources_dir() / "icons").as_posix()
    return style_sheet_path().read_text(encoding="utf-8").replace("@ICONS@", icons)
