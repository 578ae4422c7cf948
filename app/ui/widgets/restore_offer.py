"""The restore banner at launch: what recovery did to the last session's jobs, the jobs
paused at quit, and whether the last run ended without closing, with "Resume all", "Show"
and "Open log".

Words keep the "MainWindow" translation context they had inside the window.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSettings, QUrl
from PySide6.QtGui import QDesktopServices

from app.engine.crash import UncleanExit
from app.engine.paths import logs_dir
from app.ui.presenters import window_words as words
from app.ui.presenters.i18n import translate
from app.ui.presenters.interfaces import RestoreSummary
from app.ui.presenters.rows import ListFilter
from app.ui.qt import window_state
from app.ui.viewmodels.jobs_viewmodel import JobsViewModel
from app.ui.widgets.banner import Banner
from app.ui.widgets.jobs_panel import JobsPanel


class RestoreOffer:
    def __init__(
        self,
        banner: Banner,
        vm: JobsViewModel,
        jobs: JobsPanel,
        store: QSettings,
        set_filter: Callable[[ListFilter], None],
        show_note: Callable[[str], None],
    ) -> None:
        self.banner = banner
        self.vm = vm
        self.jobs = jobs
        self.store = store
        self.set_filter = set_filter
        self.show_note = show_note
        self.paused_at_quit = window_state.take_paused_at_quit(store)

    def show(self, restore: RestoreSummary | None, unclean: UncleanExit | None = None) -> None:
        """What the launch restored, whether the last run ended without closing, and the
        jobs paused at quit: resumed now if Settings say so, else offered with "Resume all"."""
        # One id once: a job paused at quit that recovery then settled is in both.
        paused = tuple(dict.fromkeys((*(restore.paused if restore else ()), *self.paused_at_quit)))
        if paused and window_state.resume_on_launch(self.store):
            self.resume_all(paused)
            self.show_note(words.resumed_note(len(paused)))
            paused = ()
        if not restore and unclean is None and not paused:
            return
        banner = self.banner
        banner.clear_actions()
        if paused:
            resume = translate("MainWindow", "Resume all")
            banner.add_action(resume, lambda: self.resume_all(paused))
        if restore and restore.job_ids:
            banner.add_action(translate("MainWindow", "Show"), lambda: self._show_restored(restore))
        if unclean is not None:
            log_file = unclean.crash_log or logs_dir()
            banner.add_action(translate("MainWindow", "Open log"), lambda: _open_path(log_file))
        # A plain word beside the ✕: the news of a crash is read once, then let go.
        banner.add_action(translate("MainWindow", "Dismiss"), banner.hide)
        banner.show_text(words.restore_text(restore, self.paused_at_quit, unclean))

    def resume_all(self, job_ids: tuple[int, ...]) -> None:
        """Resume those still paused (the ids the launch offered), once."""
        self.vm.resume_all(job_ids)
        self.paused_at_quit = ()
        self.banner.hide()

    def _show_restored(self, restore: RestoreSummary) -> None:
        self.set_filter(ListFilter.ALL)
        self._select_when_loaded(list(restore.job_ids))

    def _select_when_loaded(self, ids: list[int]) -> None:
        if any(self.vm.jobs.row_of(i) is not None for i in ids):
            self.jobs.select_jobs(ids)
            return

        def once() -> None:
            self.vm.refreshed.disconnect(once)
            self.jobs.select_jobs(ids)

        self.vm.refreshed.connect(once)


def _open_path(path: Path) -> None:
    QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))
