"""The main window: prompt on the left, the image in the middle, jobs and timeline on the right."""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex, QSettings, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app import __version__
from app.engine.crash import UncleanExit
from app.engine.jobs.params import InvalidParameters
from app.engine.jobs.states import JobStatus
from app.engine.paths import data_dir, database_path, logs_dir
from app.engine.settings import PRUNE_EVERY_S, NewJobValues, Settings
from app.engine.workers.worker_states import WorkerRequest
from app.ui.itemmodels.gallery_model import GALLERY_PAGE, GalleryModel
from app.ui.itemmodels.job_list_model import ROW_ROLE
from app.ui.presenters import shortcuts
from app.ui.presenters.actions import Action, applies
from app.ui.presenters.i18n import translate
from app.ui.presenters.interfaces import (
    ListLoras,
    ListModels,
    NoWorkers,
    RestoreSummary,
    WorkerPool,
    no_loras,
)
from app.ui.presenters.queue_service import CancelOutcome, Outcome, QueueService
from app.ui.presenters.rows import JobRow, format_duration
from app.ui.presenters.shortcuts import Shortcut
from app.ui.qt.dbthread import Runner, ThreadRunner
from app.ui.qt.file_manager import FileManager
from app.ui.qt.gc_guard import collect_on_gui_thread
from app.ui.qt.icons import app_icon
from app.ui.qt.pruning import AutoPruner, Prune
from app.ui.qt.thumbnails import ThumbnailCache
from app.ui.qt.worker_feed import WorkerFeed, WorkerStatus
from app.ui.viewmodels.jobs_viewmodel import JobsViewModel
from app.ui.widgets.banner import Banner, BannerStack
from app.ui.widgets.detail import DetailController
from app.ui.widgets.gallery import GalleryView
from app.ui.widgets.image_panel import ImagePanel
from app.ui.widgets.image_viewer import ImageViewer
from app.ui.widgets.jobs_panel import JobsPanel
from app.ui.widgets.notify import Notifier
from app.ui.widgets.prompt_panel import PromptPanel, defaults_form
from app.ui.widgets.quit_dialog import ask_pause_and_quit
from app.ui.widgets.settings_dialog import SettingsDialog, resume_on_launch, ui_settings
from app.ui.widgets.shortcuts_dialog import ShortcutsDialog
from app.ui.widgets.stats_dialog import StatsDialog
from app.ui.widgets.timeline_panel import TimelinePanel
from app.ui.widgets.workers_panel import Show, WorkersPanel

log = logging.getLogger(__name__)

WATCH_STORE_MS = 250  # the change counter: microseconds to read, so poll it often
CLOCK_MS = 1000  # durations and ETAs of running jobs
FORM_GROUP = "form"  # the prompt settings offered again at the next launch
MAX_VARIATIONS = 16
DEFAULT_VARIATIONS = 4  # as the engine's `submit_variations`
UNDO_MS = 6000  # how long a cancel of queued jobs can be undone
PAUSED_AT_QUIT = "jobs/paused_at_quit"  # ids the quit question promised to continue


@dataclass
class Dependencies:
    """Everything the window needs from outside, handed in (tests pass fakes)."""

    queue: QueueService
    workers: WorkerPool
    settings: Settings
    save_settings: Callable[[Settings], None]
    list_models: ListModels
    list_loras: ListLoras = no_loras
    restore: RestoreSummary | None = None
    # None: ask with a dialog. Tests answer with a function.
    confirm_quit: Callable[[int], bool] | None = None
    shutdown_timeout_s: float = 15.0
    # One prune by the settings (None: the window never prunes), and how often it runs.
    prune: Prune | None = None
    prune_every_s: float = PRUNE_EVERY_S


class MainWindow(QMainWindow):
    def __init__(
        self,
        deps: Dependencies,
        *,
        runner: Runner | None = None,
        image_runner: Runner | None = None,
        settings_store: QSettings | None = None,
    ) -> None:
        super().__init__()
        collect_on_gui_thread()  # before any worker thread starts (see gc_guard)
        self.deps = deps
        self.setWindowTitle("Easel")
        self.setWindowIcon(app_icon())
        self.runner = runner or ThreadRunner()
        self.image_runner = image_runner or ThreadRunner("easel-images")
        self.store = settings_store or ui_settings()
        self.thumbs = ThumbnailCache(self.image_runner, self)
        self.vm = JobsViewModel(deps.queue, self.runner, self.thumbs, self)
        self.notifier = Notifier(app_icon(), self)
        self.file_manager = FileManager(self)
        self.feed = WorkerFeed(lambda: self.deps.workers, self)
        self.pruner = AutoPruner(deps.prune, lambda: self.deps.settings, deps.prune_every_s, self)
        self.worker_status = WorkerStatus()
        self._follow: int | None = None
        self._counts: dict[JobStatus, int] = {}
        self._eta_s: float | None = None  # learned from the history; None: nothing to go on
        self._quitting = False
        self._shut_down = False
        self._gallery_successes = -1
        self.shortcuts_dialog: ShortcutsDialog | None = None
        self.stats_dialog: StatsDialog | None = None
        self.workers_panel: WorkersPanel | None = None
        self.viewer: ImageViewer | None = None
        self.variations_dialog: QInputDialog | None = None
        self._build()
        self._connect()
        self._restore_geometry()
        self._start_timers()
        self.feed.start()
        self._paused_at_quit = self._take_paused_at_quit()
        self.show_restore(deps.restore)
        self.vm.refresh()
        self._list_models()

    # --- building -----------------------------------------------------------------------------

    def _build(self) -> None:
        self.prompt = PromptPanel()
        self.prompt.defaults = self.deps.settings.new_job_defaults
        self.image = ImagePanel()
        self.gallery_model = GalleryModel(self.thumbs, self)
        self.gallery = GalleryView()
        self.gallery.setModel(self.gallery_model)
        self.jobs = JobsPanel(self.vm)
        self.timeline = TimelinePanel()
        self.detail = DetailController(self.vm, self.image_runner, self.timeline, self.image, self)
        self.restore_banner = Banner("info")
        self.undo_banner = Banner("info")
        self._held: CancelOutcome | None = None  # queued jobs held for an undo of their cancel
        self._undo_timer = QTimer(self)
        self._undo_timer.setSingleShot(True)
        self._undo_timer.timeout.connect(self._finish_cancel)
        self.error_banner = Banner("error")
        center = QWidget()
        column = QVBoxLayout(center)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(8)
        column.addWidget(self.image, 1)
        column.addWidget(self.gallery)
        right = _vsplit("right", self.jobs, self.timeline)
        right.setSizes([520, 320])
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("main")
        for widget in (self.prompt, center, right):
            self.splitter.addWidget(widget)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setCollapsible(1, False)
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.setSpacing(8)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(body)
        # Over the image area, not above the panels: a banner coming or going never moves the
        # layout, and never hides the form, the filters or the job list.
        banners = [self.error_banner, self.restore_banner, self.undo_banner]
        self.banners = BannerStack(center, banners)
        self.counts_label = QLabel()
        self.statusBar().addWidget(self.counts_label, 1)  # hidden while a note shows
        self.statusBar().addPermanentWidget(self.worker_status)
        self._menus()

    def _menus(self) -> None:
        menu = self.menuBar().addMenu("&Easel")  # the name of the app: the same in every language
        settings = QAction(self.tr("&Settings…"), self)
        settings.setShortcuts(_keys(shortcuts.SETTINGS))
        settings.triggered.connect(self.open_settings)
        quit_action = QAction(self.tr("&Quit"), self)
        quit_action.setShortcuts(_keys(shortcuts.QUIT))
        quit_action.triggered.connect(self.close)
        about = QAction(self.tr("&About Easel"), self)
        about.triggered.connect(self.show_about)
        menu.addAction(settings)
        menu.addAction(about)
        menu.addSeparator()
        menu.addAction(quit_action)
        view = self.menuBar().addMenu(self.tr("&View"))
        find = QAction(self.tr("&Search jobs"), self)
        find.setShortcuts(_keys(shortcuts.SEARCH))
        find.triggered.connect(self.jobs.focus_search)
        view.addAction(find)
        statistics = QAction(self.tr("S&tatistics…"), self)
        statistics.triggered.connect(self.show_stats)
        view.addAction(statistics)
        workers = QAction(self.tr("&Workers…"), self)
        workers.triggered.connect(self.show_workers)
        view.addAction(workers)
        help_menu = self.menuBar().addMenu(self.tr("&Help"))
        keys = QAction(self.tr("&Keyboard shortcuts"), self)
        keys.setShortcuts(_keys(shortcuts.HELP))
        keys.triggered.connect(self.show_shortcuts)
        help_menu.addAction(keys)

    def show_stats(self) -> None:
        if self.stats_dialog is None:
            self.stats_dialog = StatsDialog(self._load_stats, self)
        else:
            self.stats_dialog.reload()
        self.stats_dialog.show()
        self.stats_dialog.raise_()

    def _load_stats(self, days: float | None, show: Callable[[dict[str, Any]], None]) -> None:
        """A scan of the period's history: on the store thread, never the GUI's."""
        self.runner.run(lambda: self.deps.queue.stats(days), show, self.show_error)

    def show_workers(self) -> None:
        if self.workers_panel is None:
            self.workers_panel = WorkersPanel(self._load_workers, self._ask_worker, self)
        self.workers_panel.show()  # reads the workers at once, then every few seconds
        self.workers_panel.raise_()

    def _load_workers(self, show: Show) -> None:
        timeout_s = self.deps.settings.heartbeat_timeout_s

        def failed(text: str) -> None:
            if self.workers_panel is not None:
                self.workers_panel.load_failed()
            self.show_error(text)

        self.runner.run(lambda: self.deps.queue.workers(timeout_s), show, failed)

    def _ask_worker(self, worker_id: str, request: WorkerRequest) -> None:
        """Drain or stop one worker: a request on its row, read by the worker's own beat."""
        timeout_s = self.deps.settings.heartbeat_timeout_s

        def asked(outcome: Outcome) -> None:
            if outcome.errors:
                self.show_error(" ".join(outcome.errors))
            if self.workers_panel is not None:
                self.workers_panel.reload()

        self.runner.run(
            lambda: self.deps.queue.ask_worker(worker_id, request, timeout_s), asked,
            self.show_error,
        )  # fmt: skip

    def show_shortcuts(self) -> None:
        if self.shortcuts_dialog is None:
            self.shortcuts_dialog = ShortcutsDialog(self)
        self.shortcuts_dialog.show()
        self.shortcuts_dialog.raise_()

    def show_about(self) -> None:
        QMessageBox.about(self, self.tr("About Easel"), about_text(self.worker_status.device))

    def _connect(self) -> None:
        for keys in _keys(shortcuts.GENERATE):
            QShortcut(keys, self, self.generate)
        self.jobs.open_requested.connect(self.open_image)
        for keys in _keys(shortcuts.NEXT_PANE):
            QShortcut(keys, self, self.next_pane)
        # Generate -> the job list -> on: the list is one Tab away from the form, and its
        # cells are not a Tab trap (JobsPanel turns tab-key navigation off).
        QWidget.setTabOrder(self.prompt.generate, self.jobs.table)
        self.prompt.generate_requested.connect(self.generate)
        self.prompt.message.connect(self.show_note)
        self.image.message.connect(self.show_note)
        self.prompt.problem.connect(self.show_error)
        self.image.problem.connect(self.show_error)
        self.file_manager.problem.connect(self.show_error)
        self.detail.problem.connect(self.show_error)
        self.vm.error.connect(self.show_error)
        self.vm.submitted.connect(self._submitted)
        self.vm.refreshed.connect(self._refreshed)
        self.vm.counts_changed.connect(self._counts_changed)
        self.vm.settled.connect(self.notifier.job_settled)
        self.vm.cancel_held.connect(self._cancel_held)
        self.feed.messages.connect(self._worker_messages)
        self.pruner.pruned.connect(self.show_note)
        self.pruner.failed.connect(
            lambda error: self.show_error(
                self.tr("Could not remove old finished jobs: {error}").format(error=error)
            )
        )
        self.feed.failed.connect(self.show_error)
        self.jobs.selection_changed.connect(self.detail.select)
        self.gallery.clicked.connect(self._gallery_clicked)
        self.image.reuse.clicked.connect(self.reuse_settings)
        self.image.follow_up.connect(self._follow_up_shown)
        self.jobs.follow_up.connect(self.follow_up)
        self.prompt.generate_upscale_requested.connect(lambda: self.generate(upscale=True))
        self.prompt.init_requested.connect(self._prepare_init)
        self.image.canvas.double_clicked.connect(self._view_shown_image)

    def _start_timers(self) -> None:
        self.timers = []
        for interval, slot in ((WATCH_STORE_MS, self.vm.tick), (CLOCK_MS, self._clock)):
            timer = QTimer(self)
            timer.timeout.connect(slot)
            timer.start(interval)
            self.timers.append(timer)

    # --- generating ---------------------------------------------------------------------------

    def generate(self, *, upscale: bool = False) -> None:
        """Queue the form as it is on screen; `upscale`: each image with its upscale child."""
        try:
            params = self.prompt.params()
        except InvalidParameters as error:  # a number on screen cannot be used: say which
            self.show_error(self.tr("Not queued: {error}").format(error=error))
            self.prompt.focus_first_problem()
            return
        if not params.prompt.strip():
            self.show_error(self.tr("Type a prompt first"))
            self.prompt.prompt.setFocus()
            return
        filter_statuses = {"Done", "Failed"}
        if self.vm.filter_name in filter_statuses:  # new jobs would be invisible there
            self.set_filter("All")
        self.vm.submit(
            params, self.prompt.image_count(), init_png=self.prompt.init_png(), upscale=upscale
        )
        self._save_form()  # now, not only at quit: a crash must not forget them

    # --- jobs that build on jobs ---------------------------------------------------------------

    def follow_up(self, action: Action, rows: list[JobRow]) -> None:
        """Upscale, variations, "use as init image" or "show in folder" on jobs of the list or
        the shown one."""
        if not rows:
            return
        if action is Action.STAR:
            self.vm.star([row.id for row in rows], on=not all(row.starred for row in rows))
        elif action is Action.UPSCALE:
            self.vm.upscale([row.id for row in rows])
        elif action is Action.VARY:
            self.ask_variations(rows[0])
        elif action is Action.USE_AS_INIT:
            self.use_as_init(rows[0].id)
        elif action is Action.SHOW_IN_FOLDER and rows[0].output_path:
            self.file_manager.show_in_folder(rows[0].output_path)

    def _follow_up_shown(self, action: Action) -> None:
        if self.detail.row is not None and applies(action, self.detail.row):
            self.follow_up(action, [self.detail.row])

    def ask_variations(self, row: JobRow) -> None:
        """How many variations: a small window-modal question (Enter takes the default)."""
        dialog = QInputDialog(self)
        dialog.setWindowTitle(self.tr("Variations of job {id}").format(id=row.id))
        dialog.setLabelText(self.tr("How many images close to job {id}?").format(id=row.id))
        dialog.setInputMode(QInputDialog.InputMode.IntInput)
        dialog.setIntRange(1, MAX_VARIATIONS)
        dialog.setIntValue(DEFAULT_VARIATIONS)
        dialog.setOkButtonText(self.tr("Queue"))
        dialog.setCancelButtonText(self.tr("Cancel"))
        dialog.intValueSelected.connect(lambda count: self.vm.variations(row.id, count))
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.variations_dialog = dialog
        dialog.open()

    def use_as_init(self, job_id: int) -> None:
        """Fill the form from a finished job, starting from its image (read off the GUI thread)."""
        self.runner.run(
            lambda: self.deps.queue.init_from_job(job_id), self.prompt.set_init, self.show_error
        )

    def _prepare_init(self, source: object, name: str) -> None:
        """A dropped or pasted image as init image; one that cannot be used: the red banner."""
        assert isinstance(source, bytes | Path)
        self.runner.run(
            lambda: self.deps.queue.prepare_init(source, name),
            self.prompt.set_init,
            lambda message: self.show_error(
                self.tr("Cannot start from {name}: {error}").format(name=name, error=message)
            ),
        )

    def _submitted(self, job_ids: tuple[int, ...]) -> None:
        self._follow = job_ids[0]  # select the new job once the list has it: see its progress

    def _refreshed(self) -> None:
        if self._follow is not None and self.vm.jobs.row_of(self._follow) is not None:
            self.jobs.select_jobs([self._follow])
            self._follow = None

    def set_filter(self, name: str) -> None:
        for button in self.jobs.filters.buttons():
            button.setChecked(button.property("filter") == name)
        self.vm.set_filter(name)

    # --- live updates -------------------------------------------------------------------------

    def use_workers(self, workers: WorkerPool) -> None:
        """Switch to `workers` and start them (off the GUI thread): once the store is open."""
        self.feed.stop()
        self.deps.workers = workers
        if isinstance(workers, NoWorkers):
            self.worker_status.setText(self.tr("No workers: images cannot be generated"))
        else:
            self.worker_status.starting()
        self.feed.start(start_pool=True)

    def _worker_messages(self, messages: list) -> None:
        for message in messages:
            self.vm.live.handle(message)
            self.worker_status.handle(message)

    def _clock(self) -> None:
        self.vm.jobs.tick()
        self.timeline.tick()

    @staticmethod
    def _busy(counts: dict[JobStatus, int]) -> bool:
        return any(counts.get(s, 0) for s in JobStatus if s.is_running or s is JobStatus.PENDING)

    def _show_eta(self, seconds: float | None) -> None:
        self._eta_s = seconds if self._busy(self._counts) else None
        self._show_counts()

    def _show_counts(self) -> None:
        """ "2 running · 12 queued, about 3 min · 40 jobs" (the estimate: learned, see ETA)."""
        counts = self._counts
        running = sum(counts.get(s, 0) for s in JobStatus if s.is_running)
        queued = counts.get(JobStatus.PENDING, 0)
        if self._eta_s is not None:
            waiting = self.tr("{queued} queued, about {eta}").format(
                queued=queued, eta=format_duration(self._eta_s)
            )
        else:
            waiting = self.tr("{queued} queued").format(queued=queued)
        self.counts_label.setText(
            self.tr("{running} running · {waiting} · {jobs}").format(
                running=running, waiting=waiting, jobs=_jobs(sum(counts.values()))
            )
        )

    def _counts_changed(self, counts: dict[JobStatus, int]) -> None:
        self._counts = counts
        self._show_counts()
        if self._busy(counts):  # a read of the history: on the store thread, per change
            workers = self.deps.settings.workers
            self.runner.run(lambda: self.deps.queue.queue_eta_s(workers), self._show_eta)
        else:
            self._show_eta(None)
        successes = counts.get(JobStatus.SUCCESS, 0)
        if successes != self._gallery_successes:
            self._gallery_successes = successes
            self.runner.run(
                lambda: self.deps.queue.finished(GALLERY_PAGE), self.gallery_model.set_rows
            )

    def next_pane(self) -> None:
        """F6: focus the next of the prompt, the job list and the timeline."""
        panes = [self.prompt.prompt, self.jobs.table, self.timeline.tree]
        focused = QApplication.focusWidget()
        here = next((i for i, pane in enumerate(panes) if pane is focused), -1)
        panes[(here + 1) % len(panes)].setFocus(Qt.FocusReason.TabFocusReason)

    def open_image(self, row: JobRow) -> None:
        """Enter in the job list: the finished image in the viewer, among the others."""
        if not row.output_path:
            self.show_note(self.tr("Job {id} has no image yet").format(id=row.id))
            return
        paths = self.gallery_model.paths()
        if row.output_path not in paths:
            paths = [row.output_path]
        self.viewer = ImageViewer(paths, paths.index(row.output_path), self)
        self.viewer.problem.connect(self.show_error)
        self.viewer.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.viewer.show()

    def _view_shown_image(self) -> None:
        if self.detail.row is not None and self.image.path is not None:
            self.open_image(self.detail.row)

    def reuse_settings(self) -> None:
        if self.detail.row is not None:
            self.prompt.set_params(self.detail.row.params)
            self.show_note(
                self.tr("Settings of job {id} are in the form").format(id=self.detail.row.id)
            )

    def _gallery_clicked(self, index: QModelIndex) -> None:
        row = index.data(ROW_ROLE)
        if row is None:
            return
        if self.vm.jobs.row_of(row.id) is not None:
            self.jobs.select_jobs([row.id])
        else:
            self.detail.show_finished(row)

    # --- cancelling, with undo for queued jobs -------------------------------------------------

    def _cancel_held(self, outcome: CancelOutcome) -> None:
        """Say what a cancel did; queued jobs get an Undo for UNDO_MS, then are cancelled."""
        self._finish_cancel()  # an earlier undo chance ends: one at a time
        lost = [
            self.tr(
                "job {id} stopped at step {step} of {total}, that progress is discarded"
            ).format(id=row.id, step=row.progress_step, total=row.progress_total)
            for row in outcome.stopped
        ]
        if not outcome.held:
            if lost:
                self.show_note(self.tr("Cancelled {jobs}").format(jobs="; ".join(lost)))
            return
        self._held = outcome
        seconds = UNDO_MS // 1000
        text = self.tr("{jobs} will be cancelled in {n} s").format(
            jobs=_jobs(len(outcome.held)), n=seconds
        )
        self.undo_banner.clear_actions()
        self.undo_banner.add_action(self.tr("Undo"), self.undo_cancel)
        self.undo_banner.show_text("; ".join([text, *lost]), hide_after_ms=UNDO_MS)
        self._undo_timer.start(UNDO_MS)

    def undo_cancel(self) -> None:
        held, self._held = self._held, None
        self._undo_timer.stop()
        self.undo_banner.hide()
        if held is not None:
            self.vm.undo_cancel(held)
            self.show_note(self.tr("Kept {jobs}").format(jobs=_jobs(len(held.held))))

    def _finish_cancel(self) -> None:
        held, self._held = self._held, None
        self._undo_timer.stop()
        if held is not None:
            self.undo_banner.hide()
            self.vm.finish_cancel(held.held)

    # --- messages -----------------------------------------------------------------------------

    def show_error(self, text: str, *, sticky: bool = False) -> None:
        """A readable line in the red banner; it goes away by itself unless `sticky`."""
        self.error_banner.show_text(text, hide_after_ms=0 if sticky else 12_000)

    def show_note(self, text: str) -> None:
        self.statusBar().showMessage(text, 6000)

    def show_restore(
        self, restore: RestoreSummary | None, unclean: UncleanExit | None = None
    ) -> None:
        """What the launch restored, whether the last run ended without closing, and the
        jobs paused at quit: resumed now if Settings say so, else offered with "Resume all"."""
        paused = (*(restore.paused if restore else ()), *self._paused_at_quit)
        if paused and resume_on_launch(self.store):
            self._resume_all(paused)
            self.show_note(
                self.tr("Resumed {jobs} paused when Easel last closed").format(
                    jobs=_jobs(len(paused))
                )
            )
            paused = ()
        if not restore and unclean is None and not paused:
            return
        banner = self.restore_banner
        banner.clear_actions()
        if paused:
            banner.add_action(self.tr("Resume all"), lambda: self._resume_all(paused))
        if restore and restore.job_ids:
            banner.add_action(self.tr("Show"), lambda: self._show_restored(restore))
        text = restore.describe() if restore else ""
        if self._paused_at_quit:
            waiting = self.tr(
                "{jobs} paused when Easel closed: they continue when you resume"
            ).format(jobs=_jobs(len(self._paused_at_quit)))
            text = "; ".join(filter(None, [text, waiting]))
        if unclean is not None:
            log_file = unclean.crash_log or logs_dir()
            banner.add_action(self.tr("Open log"), lambda: _open_path(log_file))
            text = (
                f"{describe_unclean_exit(unclean)} {text or self.tr('No jobs needed restoring.')}"
            )
        banner.show_text(text)

    def _resume_all(self, job_ids: tuple[int, ...]) -> None:
        """Resume those still paused (the ids the launch offered), once."""
        self.vm.resume_all(job_ids)
        self._paused_at_quit = ()
        self.restore_banner.hide()

    def _take_paused_at_quit(self) -> tuple[int, ...]:
        """The jobs the last quit paused; forgotten once read, so they are offered once."""
        saved = self.store.value(PAUSED_AT_QUIT, [])
        self.store.remove(PAUSED_AT_QUIT)
        items = saved if isinstance(saved, list) else [saved]  # one item reads as a string
        return tuple(int(str(i)) for i in items if str(i).isdigit())

    def _show_restored(self, restore: RestoreSummary) -> None:
        self.set_filter("All")
        ids = list(restore.job_ids)
        self._select_when_loaded(ids)

    def _select_when_loaded(self, ids: list[int]) -> None:
        if any(self.vm.jobs.row_of(i) is not None for i in ids):
            self.jobs.select_jobs(ids)
            return

        def once() -> None:
            self.vm.refreshed.disconnect(once)
            self.jobs.select_jobs(ids)

        self.vm.refreshed.connect(once)

    # --- settings and geometry ----------------------------------------------------------------

    def start_pruning(self) -> None:
        """Apply "keep finished jobs" now and every hour: once the store is open and recovered."""
        self.pruner.start()

    def open_settings(self) -> None:
        dialog = SettingsDialog(
            self.deps.settings, self.deps.save_settings, self, store=self.store,
            models=self.prompt.model_choices(),
        )  # fmt: skip
        if dialog.exec() and dialog.saved is not None:
            before, self.deps.settings = self.deps.settings, dialog.saved
            self.prompt.defaults = dialog.saved.new_job_defaults
            self.pruner.settings_changed(before, dialog.saved)  # now, not at the next hour
            self.deps.queue.max_attempts = dialog.saved.max_attempts
            self._list_models()
            self.show_note(self.tr("Settings saved"))

    def _list_models(self) -> None:
        """Models and LoRAs for the prompt panel: a folder scan, so on the store thread."""
        self.runner.run(self.deps.list_models, self.prompt.set_models)
        self.runner.run(self.deps.list_loras, self.prompt.set_loras)

    def _restore_geometry(self) -> None:
        geometry = self.store.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        else:
            self.resize(1480, 900)
        # The job list needs room for its columns; the image takes what is left.
        width = self.width()
        self.splitter.setSizes(
            [300, width - 300 - max(700, int(width * 0.46)), max(700, int(width * 0.46))]
        )
        for splitter in self.findChildren(QSplitter):
            state = self.store.value(f"splitter/{splitter.objectName()}")
            if state is not None:
                splitter.restoreState(state)
        self.image.set_pixels(bool(self.store.value("view/pixels", False, type=bool)))
        self.prompt.recall(self._first_form())

    def _first_form(self) -> dict[str, str]:
        """What the form starts with: Settings' defaults for new jobs, or the last used."""
        if self.deps.settings.new_jobs_start_with is NewJobValues.DEFAULTS:
            return defaults_form(self.deps.settings.new_job_defaults)
        self.store.beginGroup(FORM_GROUP)
        last_used = {key: str(self.store.value(key)) for key in self.store.childKeys()}
        self.store.endGroup()
        return last_used

    def _save_form(self) -> None:
        self.store.beginGroup(FORM_GROUP)
        for key, value in self.prompt.remembered().items():
            self.store.setValue(key, value)
        self.store.endGroup()

    def _save_geometry(self) -> None:
        self.store.setValue("window/geometry", self.saveGeometry())
        for splitter in self.findChildren(QSplitter):
            self.store.setValue(f"splitter/{splitter.objectName()}", splitter.saveState())
        self.store.setValue("view/pixels", self.image.scaling.isChecked())
        self._save_form()
        self.store.sync()

    # --- quitting -----------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._quitting:
            event.accept()
            return
        running = self._running_ids()
        if running and not self._confirm_quit(len(running)):
            event.ignore()
            return
        self._quitting = True
        if running:  # the quit question promised they continue next time: remember which
            self.store.setValue(PAUSED_AT_QUIT, [str(i) for i in running])
        self._save_geometry()
        self.shut_down()
        event.accept()

    def _running_ids(self) -> tuple[int, ...]:
        try:
            return self.deps.queue.running_ids()
        except Exception:  # the store is unreadable: nothing we can pause anyway
            log.exception("could not count running jobs")
            return ()

    def _finish_cancel_now(self) -> None:
        """At quit the undo chance is over: cancel held jobs here (the store thread stops)."""
        held, self._held = self._held, None
        self._undo_timer.stop()
        if held is not None:
            try:
                self.deps.queue.finish_cancel(held.held)
            except Exception:  # they stay paused, which loses nothing
                log.exception("could not finish cancelling %s", held.held)

    def _confirm_quit(self, running: int) -> bool:
        if self.deps.confirm_quit is not None:
            return self.deps.confirm_quit(running)
        return ask_pause_and_quit(self, running)

    def shut_down(self) -> None:
        """Stop timers, let the workers pause their jobs, and close the store threads (once)."""
        if self._shut_down:
            return
        self._shut_down = True
        for timer in self.timers:
            timer.stop()
        self._finish_cancel_now()
        self.feed.stop()
        self.pruner.stop()
        self.statusBar().showMessage(self.tr("Pausing running jobs…"))
        self.statusBar().repaint()  # the shutdown below blocks; say what is happening first
        try:
            self.deps.workers.shutdown(self.deps.shutdown_timeout_s)
        except Exception:
            log.exception("worker shutdown failed")
        self.notifier.hide()
        self.runner.close()
        self.image_runner.close()
        self.deps.queue.close()


def _vsplit(name: str, *widgets: QWidget) -> QSplitter:
    splitter = QSplitter(Qt.Orientation.Vertical)
    splitter.setObjectName(name)
    for widget in widgets:
        splitter.addWidget(widget)
    splitter.setStretchFactor(0, 1)
    splitter.setCollapsible(0, False)
    return splitter


def _jobs(n: int) -> str:
    if n == 1:
        return translate("MainWindow", "1 job")
    return translate("MainWindow", "{n} jobs").format(n=n)


def describe_unclean_exit(unclean: UncleanExit) -> str:
    if unclean.crash_log:
        return translate("MainWindow", "Easel did not close cleanly last time (it crashed).")
    return translate(
        "MainWindow",
        "Easel did not close cleanly last time (it was killed or the computer stopped).",
    )


def _keys(shortcut: Shortcut) -> list[QKeySequence]:
    return [QKeySequence(keys) for keys in shortcut.keys]


def _open_path(path: Path) -> None:
    QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))


def about_text(device: str | None) -> str:
    rows = [
        (translate("MainWindow", "Version"), __version__),
        (translate("MainWindow", "Data folder"), str(data_dir())),
        (translate("MainWindow", "Database"), str(database_path())),
        (
            translate("MainWindow", "Device"),
            device or translate("MainWindow", "known once a worker is ready"),
        ),
        (translate("MainWindow", "Logs"), str(logs_dir())),
    ]
    cells = "".join(
        f"<tr><td><b>{k}</b>&nbsp;&nbsp;</td><td>{html.escape(v)}</td></tr>" for k, v in rows
    )
    tagline = translate("MainWindow", "Local image generation where no job ever vanishes.")
    intro = f"<h3>Easel</h3><p>{html.escape(tagline)}</p>"
    return f"{intro}<table>{cells}</table>"
