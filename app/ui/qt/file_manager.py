"""The desktop side of "Show in folder": QProcess, QtDBus and QDesktopServices.

Which of them to use, and the fallback to opening the folder, is decided in
`app.ui.presenters.reveal` (Qt-free, tested per system with a fake launcher).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QUrl, Signal
from PySide6.QtDBus import (
    QDBusConnection,
    QDBusMessage,
    QDBusPendingCall,
    QDBusPendingCallWatcher,
)
from PySide6.QtGui import QDesktopServices

from app.ui.presenters.reveal import (
    FILE_MANAGER_PATH,
    FILE_MANAGER_SERVICE,
    SHOW_ITEMS,
    show_in_folder,
)

# A file manager that is not running yet is started by the bus (D-Bus activation), which
# can take a few seconds on a cold start; past this the folder is opened instead.
DBUS_TIMEOUT_MS = 5000


class FileManager(QObject):
    """Shows files selected in the system's file manager; `problem` says when it cannot."""

    problem = Signal(str)

    def __init__(self, parent: QObject | None = None, bus: QDBusConnection | None = None) -> None:
        super().__init__(parent)
        self.bus = bus  # None: the session bus (tests use a private one)
        self._waiting: set[QDBusPendingCallWatcher] = set()

    def show_in_folder(self, path: Path | str) -> None:
        show_in_folder(Path(path), self, self.problem.emit)

    # --- the Launcher protocol ---------------------------------------------------------------

    def start(self, program: str, arguments: Sequence[str]) -> bool:
        started, _pid = QProcess.startDetached(program, list(arguments))
        return bool(started)

    def show_items(self, uris: Sequence[str], failed: Callable[[], None]) -> None:
        """ShowItems, asynchronously: the window never waits for the bus."""
        bus = self.bus if self.bus is not None else QDBusConnection.sessionBus()
        if not bus.isConnected():  # no session bus (a bare X session, a container)
            failed()
            return
        call = QDBusMessage.createMethodCall(
            FILE_MANAGER_SERVICE, FILE_MANAGER_PATH, FILE_MANAGER_SERVICE, SHOW_ITEMS
        )
        call.setArguments([list(uris), ""])  # (as, s): the URIs, no startup id
        watcher = QDBusPendingCallWatcher(bus.asyncCall(call, DBUS_TIMEOUT_MS), self)
        self._waiting.add(watcher)

        def answered(done: QDBusPendingCall) -> None:
            self._waiting.discard(watcher)
            watcher.deleteLater()
            if done.isError():  # no file manager on the bus, or it refused
                failed()

        watcher.finished.connect(answered)

    def open_folder(self, folder: Path) -> bool:
        return folder.is_dir() and QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))
