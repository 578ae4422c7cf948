"""Closing the main window: the question about the jobs this window's workers run, then one
shutdown that lets them pause and remembers exactly the jobs they paused.

Another window or a headless worker on the same data folder runs jobs of its own: they are
not this window's to ask about, pause or remember (issue 21.11). Words keep the
"MainWindow" translation context they had inside the window.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from PySide6.QtCore import QSettings
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QMainWindow

from app.ui.presenters.i18n import translate
from app.ui.qt import window_state
from app.ui.widgets.quit_dialog import ask_pause_and_quit
from app.ui.widgets.window_dependencies import Dependencies

log = logging.getLogger(__name__)

Step = Callable[[], object]


class Quitting:
    def __init__(
        self,
        window: QMainWindow,
        deps: Dependencies,
        store: QSettings,
        *,
        stop_first: Sequence[Step],
        close_last: Sequence[Step],
    ) -> None:
        """`stop_first`: what must stop before the workers pause (timers, polling);
        `close_last`: what closes after them (the store threads, the store)."""
        self.window = window
        self.deps = deps
        self.store = store
        self.stop_first = tuple(stop_first)
        self.close_last = tuple(close_last)
        self.confirmed = False  # asked and answered (or nothing to ask): the window closes
        self._shut_down = False

    def close_event(self, event: QCloseEvent, save_state: Step) -> None:
        """The window's closeEvent: ask when its workers run jobs, then save and shut down."""
        if self.confirmed:
            event.accept()
            return
        running = self._running_ids()
        if running and not self._confirm(len(running)):
            event.ignore()
            return
        self.confirmed = True
        save_state()
        self.shut_down()
        event.accept()

    def _running_ids(self) -> Sequence[int]:
        """The jobs this window's workers run: another window's or a headless worker's jobs
        on the same queue are not this window's to pause, nor to ask about."""
        try:
            return self.deps.workers.own_running_ids()
        except Exception:  # the store is unreadable: nothing we can pause anyway
            log.exception("could not count running jobs")
            return ()

    def _confirm(self, running: int) -> bool:
        if self.deps.confirm_quit is not None:
            return self.deps.confirm_quit(running)
        return ask_pause_and_quit(self.window, running)

    def shut_down(self) -> None:
        """Stop polling, let the workers pause their jobs, and close the store threads (once)."""
        if self._shut_down:
            return
        self._shut_down = True
        for stop in self.stop_first:
            stop()
        self._pause_workers()
        for close in self.close_last:
            close()

    def _pause_workers(self) -> None:
        status = self.window.statusBar()
        status.showMessage(translate("MainWindow", "Pausing running jobs…"))
        status.repaint()  # the shutdown below blocks; say what is happening first
        try:
            paused = self.deps.workers.shutdown(self.deps.shutdown_timeout_s)
        except Exception:
            log.exception("worker shutdown failed")
            paused = ()
        # The quit question promised they continue next time: remember exactly these.
        window_state.remember_paused_at_quit(self.store, paused)
