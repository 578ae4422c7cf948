"""The windows the menus open beside the main window: statistics, workers, keyboard
shortcuts and About. Each is made on first use and kept, so it reopens as it was left.

Their store reads run on the window's database thread; what fails goes to `show_error`
(the window's red banner). Words keep the "MainWindow" translation context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QMessageBox, QWidget

from app.engine.settings import Settings
from app.engine.workers.worker_states import WorkerRequest
from app.ui.presenters.i18n import translate
from app.ui.presenters.queue_service import Outcome, QueueService
from app.ui.presenters.window_words import about_text
from app.ui.qt.dbthread import Runner
from app.ui.widgets.shortcuts_dialog import ShortcutsDialog
from app.ui.widgets.stats_dialog import StatsDialog
from app.ui.widgets.workers_panel import Show, WorkersPanel


class WindowDialogs:
    def __init__(
        self,
        parent: QWidget,
        runner: Runner,
        queue: QueueService,
        settings: Callable[[], Settings],
        show_error: Callable[[str], None],
    ) -> None:
        """`settings`: the settings now (Settings may change them while the window runs)."""
        self.parent = parent
        self.runner = runner
        self.queue = queue
        self.settings = settings
        self.show_error = show_error
        self.shortcuts_dialog: ShortcutsDialog | None = None
        self.stats_dialog: StatsDialog | None = None
        self.workers_panel: WorkersPanel | None = None

    def show_stats(self) -> None:
        if self.stats_dialog is None:
            self.stats_dialog = StatsDialog(self._load_stats, self.parent)
        else:
            self.stats_dialog.reload()
        self.stats_dialog.show()
        self.stats_dialog.raise_()

    def _load_stats(self, days: float | None, show: Callable[[dict[str, Any]], None]) -> None:
        """A scan of the period's history: on the store thread, never the GUI's."""
        self.runner.run(lambda: self.queue.stats(days), show, self.show_error)

    def show_workers(self) -> None:
        if self.workers_panel is None:
            self.workers_panel = WorkersPanel(self._load_workers, self._ask_worker, self.parent)
        self.workers_panel.show()  # reads the workers at once, then every few seconds
        self.workers_panel.raise_()

    def _load_workers(self, show: Show) -> None:
        timeout_s = self.settings().heartbeat_timeout_s

        def failed(text: str) -> None:
            if self.workers_panel is not None:
                self.workers_panel.load_failed()
            self.show_error(text)

        self.runner.run(lambda: self.queue.workers(timeout_s), show, failed)

    def _ask_worker(self, worker_id: str, request: WorkerRequest) -> None:
        """Drain or stop one worker: a request on its row, read by the worker's own beat."""
        timeout_s = self.settings().heartbeat_timeout_s

        def asked(outcome: Outcome) -> None:
            if outcome.errors:
                self.show_error(" ".join(outcome.errors))
            if self.workers_panel is not None:
                self.workers_panel.reload()

        self.runner.run(
            lambda: self.queue.ask_worker(worker_id, request, timeout_s), asked, self.show_error
        )

    def show_shortcuts(self) -> None:
        if self.shortcuts_dialog is None:
            self.shortcuts_dialog = ShortcutsDialog(self.parent)
        self.shortcuts_dialog.show()
        self.shortcuts_dialog.raise_()

    def show_about(self, device: str | None) -> None:
        title = translate("MainWindow", "About Easel")
        QMessageBox.about(self.parent, title, about_text(device))
