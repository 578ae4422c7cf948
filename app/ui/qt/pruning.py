"""Prunes old finished jobs by the settings while the window runs: once the store is open and
recovered, then every hour, and again at once when Settings change how long jobs are kept.

On a thread of its own, not the store thread: a first prune of a large history takes seconds,
and the job list must not wait for it (nor the window: nothing here runs on the GUI thread).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.settings import Settings
from app.ui.qt.dbthread import ThreadRunner

Prune = Callable[[Settings], str]  # one pass by these settings -> the note ("": none)


def _retention(settings: Settings) -> tuple[int, int, bool]:
    return settings.keep_finished_days, settings.keep_finished_jobs, settings.prune_images


class AutoPruner(QObject):
    pruned = Signal(str)  # what a pass removed, for the status bar
    failed = Signal(str)

    def __init__(
        self,
        prune: Prune | None,
        settings: Callable[[], Settings],
        every_s: float,
        parent: QObject,
    ) -> None:
        """`prune`: None for a window that never prunes (`start` then does nothing)."""
        super().__init__(parent)
        self._prune = prune
        self._settings = settings  # read at each pass: Settings may have changed them
        self._runner: ThreadRunner | None = None
        self._busy = False
        self._again = False
        self.timer = QTimer(self)
        self.timer.setInterval(max(1, round(every_s * 1000)))
        self.timer.timeout.connect(self.prune_now)

    @property
    def started(self) -> bool:
        return self._runner is not None

    def start(self) -> None:
        """The first pass now, then one every interval (once: later calls do nothing)."""
        if self.started or self._prune is None:
            return
        self._runner = ThreadRunner("easel-prune")
        self.timer.start()
        self.prune_now()

    def prune_now(self) -> None:
        """A pass with the current settings; while one runs, another right after it (the
        settings it read may have changed since)."""
        if self._runner is None or self._prune is None:
            return
        if self._busy:
            self._again = True
            return
        self._busy, self._again = True, False
        settings, prune = self._settings(), self._prune
        self._runner.run(lambda: prune(settings), self._done, self._failed)

    def settings_changed(self, before: Settings, after: Settings) -> None:
        """Saved in the Settings window: a new retention applies now, not at the next hour."""
        if _retention(before) != _retention(after):
            self.prune_now()

    def stop(self) -> None:
        self.timer.stop()
        if self._runner is not None:
            self._runner.close()

    def _done(self, note: str) -> None:
        self._finished()
        if note:
            self.pruned.emit(note)

    def _failed(self, message: str) -> None:
        self._finished()
        self.failed.emit(message)

    def _finished(self) -> None:
        self._busy = False
        if self._again:
            self.prune_now()
