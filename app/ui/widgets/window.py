"""The main window: prompt on the left, the image in the middle, jobs and timeline on the right."""

from __future__ import annotations

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QShortcut
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow, QWidget

from app.engine.crash import UncleanExit
from app.engine.jobs.params import InvalidParameters
from app.engine.jobs.states import JobStatus
from app.engine.settings import NewJobValues
from app.ui.itemmodels.gallery_model import GALLERY_PAGE, GalleryModel
from app.ui.presenters import shortcuts
from app.ui.presenters import window_words as words
from app.ui.presenters.actions import Action, applies
from app.ui.presenters.interfaces import NoWorkers, RestoreSummary, WorkerPool
from app.ui.presenters.queue_service import CancelOutcome
from app.ui.presenters.rows import ListFilter
from app.ui.qt import window_state
from app.ui.qt.api_server import start_api_server
from app.ui.qt.dbthread import Runner, ThreadRunner
from app.ui.qt.file_manager import FileManager
from app.ui.qt.gc_guard import collect_on_gui_thread
from app.ui.qt.icons import app_icon
from app.ui.qt.pruning import AutoPruner
from app.ui.qt.thumbnails import ThumbnailCache
from app.ui.qt.worker_feed import WorkerFeed, WorkerStatus
from app.ui.viewmodels.jobs_viewmodel import JobsViewModel
from app.ui.widgets.banner import Banner
from app.ui.widgets.clip_actions import ClipActions
from app.ui.widgets.detail import DetailController
from app.ui.widgets.follow_ups import FollowUps
from app.ui.widgets.gallery import GalleryView
from app.ui.widgets.gallery_deleting import GalleryDeleting
from app.ui.widgets.groups_menu import add_groups_menu
from app.ui.widgets.guidance_section import guided, guided_submit, install_guidance
from app.ui.widgets.image_panel import ImagePanel
from app.ui.widgets.image_viewing import ImageViewing
from app.ui.widgets.jobs_panel import JobsPanel
from app.ui.widgets.mask_hook import install_mask_editor
from app.ui.widgets.menus import MenuSlots, build_menus, key_sequences
from app.ui.widgets.notify import Notifier
from app.ui.widgets.prompt_panel import PromptPanel, defaults_form
from app.ui.widgets.quitting import Quitting
from app.ui.widgets.restore_offer import RestoreOffer
from app.ui.widgets.timeline_panel import TimelinePanel
from app.ui.widgets.window_dependencies import Dependencies as Dependencies  # re-exported
from app.ui.widgets.window_dialogs import WindowDialogs
from app.ui.widgets.window_layout import lay_out
from app.ui.widgets.window_parts import WindowParts

WATCH_STORE_MS = 250  # the change counter: microseconds to read, so poll it often
CLOCK_MS = 1000  # durations and ETAs of running jobs
ETA_EVERY_S = 5  # the queue's ETA is asked again this often while jobs run: it follows them


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
        self.store = settings_store or window_state.ui_settings()
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
        self._ticks = 0
        self._gallery_successes = -1
        self.dialogs = WindowDialogs(
            self, self.runner, deps.queue, lambda: self.deps.settings, self.show_error
        )
        self._build()
        self._connect()
        self._restore_geometry()
        self._start_timers()
        self.api_server = start_api_server(self, deps.settings)  # off: None
        self.quitting = Quitting(
            self, deps, self.store,
            stop_first=[*(t.stop for t in self.timers), self.vm.finish_cancel_now,
                        self.deleting.finish_now, self.feed.stop, self.pruner.stop,
                        *([self.api_server.stop] if self.api_server else [])],
            close_last=[self.notifier.hide, self.runner.close, self.image_runner.close,
                        deps.queue.close],
        )  # fmt: skip
        self.feed.start()
        self.restore_offer = RestoreOffer(
            self.restore_banner, self.vm, self.jobs, self.store, self.set_filter, self.show_note
        )
        self.show_restore(deps.restore)
        self.vm.refresh()
        self._list_models()

    # --- building -----------------------------------------------------------------------------

    def _build(self) -> None:
        self.prompt = PromptPanel()
        self.prompt.defaults = self.deps.settings.new_job_defaults
        self.prompt.png_runner = self.image_runner  # dropped PNGs are read off the GUI thread
        self.image = ImagePanel()
        self.gallery_model = GalleryModel(self.thumbs, self)
        self.gallery = GalleryView()
        self.gallery.setModel(self.gallery_model)
        self.jobs = JobsPanel(self.vm)
        self.timeline = TimelinePanel()
        self.detail = DetailController(self.vm, self.image_runner, self.timeline, self.image, self)
        self.follow_ups = FollowUps(
            self, self.vm, self.deps.queue, self.prompt, self.file_manager, self.show_error
        )
        self.viewing = ImageViewing(
            self, self.vm, self.jobs, self.detail, self.gallery_model, self.prompt,
            self.show_note, self.show_error,
        )  # fmt: skip
        self.restore_banner = Banner("info")
        self.undo_banner = Banner("info")
        self.delete_banner = Banner("info")  # the gallery's Delete, with its own Undo
        self.error_banner = Banner("error")
        self.deleting = GalleryDeleting(
            self.gallery_model, self.delete_banner, self.runner, self.deps.queue,
            self.vm.refresh, self.show_error, self,
        )  # fmt: skip
        self.splitter, self.banners = lay_out(
            self, self.prompt, [self.image, self.gallery], [self.jobs, self.timeline],
            [self.error_banner, self.restore_banner, self.undo_banner, self.delete_banner],
        )  # fmt: skip
        self.counts_label = QLabel()
        self.statusBar().addWidget(self.counts_label, 1)  # hidden while a note shows
        self.statusBar().addPermanentWidget(self.worker_status)
        self._menus()

    def _menus(self) -> None:
        dialogs = self.dialogs
        build_menus(self.menuBar(), self, MenuSlots(
            settings=self.open_settings, quit=self.close,
            about=lambda: dialogs.show_about(self.worker_status.device),
            search=self.jobs.focus_search, statistics=dialogs.show_stats,
            workers=dialogs.show_workers, shortcuts=dialogs.show_shortcuts,
            models_folder=self.open_models_folder,
        ))  # fmt: skip
        parts = self.parts()
        # The Image menu: inpaint and outpaint (mask_hook), kept alive with the window.
        self.mask_editing = install_mask_editor(parts, lambda job: guided(self.guidance, job))
        if self.mask_editing.menu is not None:  # Edit with words, for a file or a paste too
            self.follow_ups.word_edits.add_to(self.mask_editing.menu, self.jobs.current_row)
        self.clips = ClipActions(  # a clip shown: save it animated, start from a frame
            self, self.image, self.image_runner,
            lambda: self.detail.row.id if self.detail.row is not None else None,
            self.follow_ups.prepare_init, self.show_note, self.show_error,
        )  # fmt: skip
        if self.mask_editing.menu is not None:
            self.clips.add_to(self.mask_editing.menu)
        self.groups_menu = add_groups_menu(  # batches and grids (issue 27)
            self.menuBar(), self, self.deps.queue,
            lambda call, done: self.runner.run(call, done, self.show_error),
            self.jobs.selected_rows, self.prompt.params, self.vm.refresh,
        )  # fmt: skip
        self.guidance = install_guidance(parts)  # the prompt panel's Control section

    def parts(self) -> WindowParts:
        """What the sections installed into the window use of it."""
        return WindowParts(self, self.prompt, self.jobs, self.vm, self.show_error, self.show_note)

    def _connect(self) -> None:
        for keys in key_sequences(shortcuts.GENERATE):
            QShortcut(keys, self, self.generate)
        self.jobs.open_requested.connect(self.viewing.open_image)
        for keys in key_sequences(shortcuts.NEXT_PANE):
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
        self.vm.undo_closed.connect(self.undo_banner.hide)
        self.feed.messages.connect(self._worker_messages)
        self.pruner.pruned.connect(self.show_note)
        self.pruner.failed.connect(
            lambda error: self.show_error(
                self.tr("Could not remove old finished jobs: {error}").format(error=error)
            )
        )
        self.feed.failed.connect(self.show_error)
        self.jobs.selection_changed.connect(self.detail.select)
        self.gallery.clicked.connect(self.viewing.gallery_clicked)
        self.gallery.activated.connect(self.viewing.gallery_opened)
        self.gallery.delete_requested.connect(self.deleting.delete)
        self.image.reuse.clicked.connect(self.viewing.reuse_settings)
        self.image.follow_up.connect(self._follow_up_shown)
        self.jobs.follow_up.connect(self.follow_ups.run)
        self.jobs.undo_requested.connect(self.undo_cancel)
        self.prompt.generate_upscale_requested.connect(lambda: self.generate(upscale=True))
        self.prompt.native_then_upscale.connect(lambda: self.generate(upscale=True))
        self.prompt.init_requested.connect(self.follow_ups.prepare_init)
        self.image.canvas.double_clicked.connect(self.viewing.view_shown_image)
        self.image.canvas.image_dropped.connect(self.prompt.take_image)  # as on the form
        self.image.reuse_seed.triggered.connect(self._reuse_seed)

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
        if self.vm.filter_name in (ListFilter.DONE, ListFilter.FAILED):  # new jobs hide there
            self.set_filter(ListFilter.ALL)
        if guided_submit(self.parts(), self.guidance):  # with control layers or reference images
            self._save_form()
            return
        self.vm.submit(
            params,
            self.prompt.image_count(),
            init_png=self.prompt.init_png(),
            upscale=upscale,
            last_png=self.prompt.last_png(),
        )
        self._save_form()  # now, not only at quit: a crash must not forget them

    # --- jobs that build on jobs ---------------------------------------------------------------

    def _follow_up_shown(self, action: Action) -> None:
        if self.detail.row is not None and applies(action, self.detail.row):
            self.follow_ups.run(action, [self.detail.row])

    def _reuse_seed(self) -> None:
        if self.detail.row is not None:
            self.prompt.use_seed(self.detail.row.params.seed)

    def _submitted(self, job_ids: tuple[int, ...]) -> None:
        self._follow = job_ids[0]  # select the new job once the list has it: see its progress

    def _refreshed(self) -> None:
        self.gallery_model.follow_stars(self.vm.jobs.rows())
        if self._follow is not None and self.vm.jobs.row_of(self._follow) is not None:
            self.jobs.select_jobs([self._follow])
            self._follow = None

    def set_filter(self, name: ListFilter) -> None:
        for button in self.jobs.filters.buttons():
            button.setChecked(button.property("filter") == name.value)
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
        self._ticks += 1
        if self._ticks % ETA_EVERY_S == 0 and words.is_busy(self._counts):
            self._ask_eta()

    def _ask_eta(self) -> None:
        """The queue's ETA, from the history and the running jobs' progress (store thread)."""
        workers = self.deps.settings.workers
        self.runner.run(lambda: self.deps.queue.queue_eta_s(workers), self._show_eta)

    def _show_eta(self, seconds: float | None) -> None:
        self._eta_s = seconds if words.is_busy(self._counts) else None
        self._show_counts()

    def _show_counts(self) -> None:
        self.counts_label.setText(words.counts_text(self._counts, self._eta_s))

    def _counts_changed(self, counts: dict[JobStatus, int]) -> None:
        self._counts = counts
        self._show_counts()
        if words.is_busy(counts):  # a read of the history: on the store thread
            self._ask_eta()
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

    # --- cancelling, with undo for queued jobs -------------------------------------------------

    def _cancel_held(self, outcome: CancelOutcome) -> None:
        """Say what a cancel did; queued jobs get an Undo while the view-model holds them."""
        if not outcome.held:
            if note := words.cancelled_note(outcome):
                self.show_note(note)
            return
        self.undo_banner.clear_actions()
        self.undo_banner.add_action(self.tr("Undo"), self.undo_cancel)
        text = words.undo_offer_text(outcome, self.vm.undo_ms)
        self.undo_banner.show_text(text, hide_after_ms=self.vm.undo_ms)

    def undo_cancel(self) -> None:
        held = self.vm.undo_cancel()
        self.undo_banner.hide()
        if held is not None:
            self.show_note(words.kept_note(held))

    # --- messages -----------------------------------------------------------------------------

    def show_error(self, text: str, *, sticky: bool = False) -> None:
        """A readable line in the red banner; it goes away by itself unless `sticky`."""
        self.error_banner.show_text(text, hide_after_ms=0 if sticky else 12_000)

    def show_note(self, text: str) -> None:
        self.statusBar().showMessage(text, 6000)

    def show_restore(
        self, restore: RestoreSummary | None, unclean: UncleanExit | None = None
    ) -> None:
        """The restore banner: what the launch restored and the jobs paused at quit."""
        self.restore_offer.show(restore, unclean)

    # --- settings and geometry ----------------------------------------------------------------

    def start_pruning(self) -> None:
        """Apply "keep finished jobs" now and every hour: once the store is open and recovered."""
        self.pruner.start()

    def open_settings(self) -> None:
        # Imported when first opened: the dialog's Shared queue section reaches the database
        # stack (SQLAlchemy, SQLModel), which the window must not wait for at start-up.
        from app.ui.widgets.settings_dialog import SettingsDialog

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

    def open_models_folder(self) -> None:
        """Where to put checkpoints and LoRAs (made if missing, so there is one to open)."""
        folder = self.deps.settings.models_path()
        try:
            (folder / "lora").mkdir(parents=True, exist_ok=True)
        except OSError as error:
            self.show_error(self.tr("Could not make the models folder {folder}: {error}").format(
                folder=folder, error=error))  # fmt: skip
            return
        if not self.file_manager.open_folder(folder):
            self.show_error(self.tr("Could not open {folder}").format(folder=folder))
            return
        self.show_note(
            self.tr("Models go in {folder}, LoRAs in its lora folder").format(folder=folder)
        )

    def _list_models(self) -> None:
        """Models and LoRAs for the prompt panel: a folder scan, so on the store thread."""
        self.runner.run(self.deps.list_models, self.prompt.set_models)
        self.runner.run(self.deps.list_loras, self.prompt.set_loras)

    def _restore_geometry(self) -> None:
        window_state.restore_geometry(self, self.splitter, self.store)
        self.jobs.restore_header(window_state.job_columns(self.store))
        self.image.set_pixels(window_state.pixels_view(self.store))
        self.prompt.recall(self._first_form())

    def _first_form(self) -> dict[str, str]:
        """What the form starts with: Settings' defaults for new jobs, or the last used."""
        if self.deps.settings.new_jobs_start_with is NewJobValues.DEFAULTS:
            return defaults_form(self.deps.settings.new_job_defaults)
        return window_state.last_form(self.store)

    def _save_form(self) -> None:
        window_state.save_form(self.store, self.prompt.remembered())

    def _save_geometry(self) -> None:
        window_state.save_geometry(self, self.store)
        window_state.save_job_columns(self.store, self.jobs.header_state())
        window_state.save_pixels_view(self.store, self.image.scaling.isChecked())
        self._save_form()
        self.store.sync()

    # --- quitting -----------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        self.quitting.close_event(event, self._save_geometry)

    def shut_down(self) -> None:
        """Stop timers, let the workers pause their jobs, and close the store threads (once)."""
        self.quitting.shut_down()
