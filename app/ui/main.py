"""The window's entry point: show the window, open the store and recover, then start workers.

Order matters. The window shows first, before the database stack is even imported (a
second on a busy machine): the window's modules import no SQLAlchemy, SQLModel or PIL
(tests/ui/test_no_torch.py), and the database thread starts once the window has painted.
The store opens and recovery runs as the first call on that thread, so every read the
window queued comes after it, and the workers start only once recovery has settled the
last session's jobs. Pruning by the settings starts then too, on a thread of its own.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget

from app.engine.crash import SessionGuard, UncleanExit
from app.engine.logs import configure_logging, log_path
from app.engine.settings import (
    Settings,
    load_settings,
    queue_is_shared,
    save_settings,
    shared_queue_from_settings,
)
from app.ui.presenters.i18n import translate
from app.ui.presenters.interfaces import LaunchWait, NoWorkers, RestoreSummary, WorkerPool
from app.ui.presenters.model_choices import LoraChoice, ModelChoice
from app.ui.presenters.queue_service import QueueService
from app.ui.qt.dbthread import ThreadRunner
from app.ui.qt.language import chosen_language, use_language
from app.ui.qt.theme import apply_theme
from app.ui.qt.window_state import ui_settings
from app.ui.widgets.window import Dependencies, MainWindow

if TYPE_CHECKING:
    from app.engine.jobs.params import GenerationParams
    from app.engine.jobs.queue import JobQueue

log = logging.getLogger(__name__)

MakeWorkers = Callable[["JobQueue", Settings], tuple[WorkerPool, str | None]]

# A shorter GIL switch interval lets the GUI thread in sooner while the database and worker
# threads run Python code (default 5 ms: a visible hitch when it happens every frame).
GIL_SWITCH_S = 0.001
STORE_AT_LATEST_MS = 2000  # the store opens at the window's first paint, or after this


def run_gui(argv: list[str]) -> int:
    session = SessionGuard("gui")
    app, window = launch(argv, previous_run=session.open())
    app.aboutToQuit.connect(window.shut_down)  # also when quit without closing the window
    app.aboutToQuit.connect(session.close)  # after the shutdown: this run ended cleanly
    return app.exec()


def launch(
    argv: list[str],
    *,
    make_workers: MakeWorkers | None = None,
    previous_run: UncleanExit | None = None,
) -> tuple[QApplication, MainWindow]:
    """Show the window now; open the store, recover and start workers in the background.

    `make_workers`: the worker pool for the open queue (default: the engine's supervisor).
    `previous_run`: how the last run ended badly, if it did (told along with the restore).
    """
    _log_to_file()
    sys.setswitchinterval(GIL_SWITCH_S)
    app = QApplication.instance() or QApplication(argv)
    assert isinstance(app, QApplication)
    app.setApplicationName("Easel")
    apply_theme(app)
    use_language(chosen_language(ui_settings()))  # before any widget: texts are set once
    settings = load_settings()
    # Held until the window has painted: opening the store first imports the database stack
    # (SQLAlchemy, SQLModel: most of a second), and that thread would share the GIL with the
    # GUI thread building and painting the window.
    runner = ThreadRunner(start=False)
    service = QueueService(
        opener=_open_queue,
        max_attempts=settings.max_attempts,
        check=_check_runnable,
    )
    deps = Dependencies(
        queue=service, workers=NoWorkers(), settings=settings, save_settings=save_settings,
        list_models=lambda: _model_choices(deps.settings),  # the folder may change
        list_loras=lambda: _lora_names(deps.settings),
        prune=lambda chosen: _prune(service, chosen),
    )  # fmt: skip

    def recovered(restore: RestoreSummary | LaunchWait | None) -> None:
        if isinstance(restore, RestoreSummary):
            _ready(window, service, settings, restore, make_workers, previous_run)
            return
        # Another program holds the write lock (None), or the store refuses writes for a
        # while: say so, and wait on the database thread as `recover` on the command line
        # does (the window stays usable); the workers start only after recovery.
        window.show_error(_lock_wait_text() if restore is None else restore.text, sticky=True)
        runner.run(
            lambda: _recover(service, settings, previous_run, wait_for_lock=True), lock_free, failed
        )

    def lock_free(restore: RestoreSummary | LaunchWait | None) -> None:
        window.error_banner.hide()
        recovered(restore if isinstance(restore, RestoreSummary) else RestoreSummary())

    def failed(message: str) -> None:
        window.show_error(_store_failure(message), sticky=True)

    # Queued before the window exists, so it is the first call on the database thread.
    runner.run(lambda: _recover(service, settings, previous_run), recovered, failed)
    window = MainWindow(deps, runner=runner)
    _show_errors_in(window)
    window.show()
    _when_painted(window, runner.start)
    return app, window


def _check_runnable(params: GenerationParams) -> object:
    """The saved settings at each submit: the models folder may change in Settings. A model
    path is this machine's user's to give, except to a shared queue."""
    from app.engine.generation.request_checks import check_runnable  # at the first submit

    return check_runnable(params, load_settings().model_search_path(), names_only=queue_is_shared())


class _FirstPaint(QObject):
    """Calls `then` once, right after `window` first painted itself."""

    def __init__(self, window: QWidget, then: Callable[[], None]) -> None:
        super().__init__(window)
        self._then = then
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            watched.removeEventFilter(self)
            QTimer.singleShot(0, self._then)  # after this paint, its children's and the flush
        return False


def _when_painted(window: QWidget, then: Callable[[], None]) -> None:
    """`then` after the window's first paint, or after STORE_AT_LATEST_MS if it has not
    painted by then (started minimized, hidden): the jobs load whether it is seen or not.
    `then` must be safe to call twice."""
    _FirstPaint(window, then)
    QTimer.singleShot(STORE_AT_LATEST_MS, then)


def _lock_wait_text() -> str:
    return translate(
        "Launch",
        "Another program holds the job database's write lock. Easel settles the last "
        "session's jobs and starts its workers as soon as it is free.",
    )


def _store_failure(message: str) -> str:
    text = translate("Launch", "Easel could not open its job store: {error}").format(error=message)
    if shared_queue_from_settings():
        text += " " + translate(
            "Launch", "Change or clear the shared queue in Settings, then restart Easel."
        )
    return text


def _open_queue() -> JobQueue:
    """The queue for the window; on a data folder it cannot write, the same jobs read-only
    (browsing them still works: the window then starts no workers and changes nothing)."""
    from app.engine.store.opening import OpenFor, open_queue
    from app.errors import DatabaseReadOnly

    try:
        return open_queue(purpose=OpenFor.LAUNCH)
    except DatabaseReadOnly:
        log.warning("the data folder is read-only; the window shows the jobs without changes")
        return open_queue(purpose=OpenFor.READING)


def _recover(
    service: QueueService,
    settings: Settings,
    previous_run: UncleanExit | None,
    *,
    wait_for_lock: bool = False,
) -> RestoreSummary | LaunchWait | None:
    from app.ui.wiring import recover_at_launch

    if service.queue.read_only:
        return RestoreSummary()  # settling jobs would write; the next writable launch does it
    since = previous_run.started_at if previous_run is not None else None
    return recover_at_launch(
        service.queue, settings, wait_for_lock=wait_for_lock, killed_since=since
    )


def _prune(service: QueueService, settings: Settings) -> str:
    from app.ui.wiring import prune_by_settings

    return prune_by_settings(service.queue, settings)


def _model_choices(settings: Settings) -> list[ModelChoice]:
    from app.ui.wiring import model_choices

    return model_choices(settings)


def _lora_names(settings: Settings) -> list[LoraChoice]:
    from app.ui.wiring import lora_choices

    return lora_choices(settings)


def _ready(
    window: MainWindow,
    service: QueueService,
    settings: Settings,
    restore: RestoreSummary,
    make_workers: MakeWorkers | None,
    previous_run: UncleanExit | None,
) -> None:
    from app.ui import wiring

    window.show_restore(restore, previous_run)
    if service.queue.read_only:
        folder = service.queue.folder or "?"
        message = translate(
            "Launch",
            "The data folder {folder} is read-only: your jobs are shown, but nothing can be "
            "queued or changed, and no worker runs.",
        )
        window.show_error(message.format(folder=folder), sticky=True)
        return
    window.start_pruning()  # after recovery: it settled the jobs a prune must judge
    workers, problem = (make_workers or wiring.make_workers)(service.queue, settings)
    if problem:
        window.show_error(problem)
    window.use_workers(workers)


def _log_to_file() -> None:
    with contextlib.suppress(OSError):  # a read-only data folder still gets a window
        configure_logging("gui")


def _show_errors_in(window: MainWindow) -> None:
    """A bug in a slot becomes one readable line in the window; the traceback goes to the log."""

    def hook(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
        log.error("unexpected error:\n%s", "".join(traceback.format_exception(kind, error, tb)))
        with contextlib.suppress(Exception):  # the window may be gone; the log has it
            window.show_error(
                translate("Launch", "Something went wrong: {error}. Details are in {log}").format(
                    error=error or kind.__name__, log=log_path("gui")
                )
            )

    sys.excepthook = hook
