"""Polls the worker pool on a thread of its own and hands the messages to the GUI thread.

`Supervisor.poll()` does more than drain messages: it reaps and restarts workers and runs
the watchdog and the retry policy, which read and write the store. Done on the GUI thread
that is a few milliseconds of stall ten times a second; here it never touches painting.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QLabel

from app.engine.workers.messages import MessageKind, WorkerMessage
from app.errors import EaselError
from app.ui.presenters.interfaces import WorkerPool

log = logging.getLogger(__name__)

POLL_S = 0.1  # progress and previews feel live at 10 Hz
DRAIN_MS = 50
START_RETRY_FIRST_S, START_RETRY_MAX_S = 0.5, 10.0  # while the database is locked elsewhere


class WorkerFeed(QObject):
    """The polling thread queues what it hears; a GUI-thread timer hands it on as signals.

    The thread never touches Qt itself (see `dbthread.ThreadRunner` for why).
    """

    messages = Signal(list)  # WorkerMessages, on the GUI thread
    failed = Signal(str)

    def __init__(self, pool: Callable[[], WorkerPool], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = pool  # read each round: the real pool arrives once the store is open
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._inbox: queue.SimpleQueue[tuple[str, object]] = queue.SimpleQueue()
        self._last_failure = ""
        self._drain = QTimer(self)
        self._drain.setInterval(DRAIN_MS)
        self._drain.timeout.connect(self.deliver)

    def start(self, *, start_pool: bool = False) -> None:
        """Begin polling; `start_pool`: first start the pool (spawning, off the GUI thread)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, args=(start_pool,), name="easel-workers", daemon=True
            )
            self._thread.start()
            self._drain.start()

    def poll_once(self) -> None:
        """One round on the polling thread (tests may call it directly, then `deliver`)."""
        try:
            batch = list(self._pool().poll())
        except Exception as error:  # a broken pipe to a worker must not end the feed
            log.exception("polling workers failed")
            self._inbox.put(
                ("failed", self.tr("Lost contact with the workers: {error}").format(error=error))
            )
            return
        if batch:
            self._inbox.put(("messages", batch))

    def deliver(self) -> None:
        """On the GUI thread: emit what the polling thread queued."""
        while True:
            try:
                kind, payload = self._inbox.get_nowait()
            except queue.Empty:
                return
            if kind == "messages":
                self.messages.emit(payload)
            elif payload != self._last_failure:  # the same failure each round: say it once
                self._last_failure = str(payload)
                self.failed.emit(payload)

    def _run(self, start_pool: bool) -> None:
        if start_pool and not self._start_pool():
            return
        while not self._stop.wait(POLL_S):
            self.poll_once()

    def _start_pool(self) -> bool:
        """Start the pool (its workers: the window ran launch recovery before); False if it
        did not start.

        A lock another program holds on the database, or a full disk, is waited out with
        backoff: the window says so once and generation starts by itself when it can."""
        delay_s = START_RETRY_FIRST_S
        while True:
            try:
                self._pool().start()
                return True
            except EaselError as error:
                if not error.transient:
                    return self._start_failed(error)
                log.warning("workers not started yet: %s; trying again in %.0f s", error, delay_s)
                text = self.tr("Image generation waits for the job database: {error}")
                self._inbox.put(("failed", text.format(error=error)))
            except Exception as error:
                return self._start_failed(error)
            if self._stop.wait(delay_s):
                return False
            delay_s = min(delay_s * 2, START_RETRY_MAX_S)

    def _start_failed(self, error: Exception) -> bool:
        log.exception("cannot start the workers")
        text = self.tr("Image generation could not start: {error}")
        self._inbox.put(("failed", text.format(error=error)))
        return False

    def stop(self) -> None:
        """Stop polling and wait for the current round, so the pool can be shut down."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._drain.stop()
        self.deliver()


class WorkerStatus(QLabel):
    """The status bar's word on the workers: a queue that never moves must say why."""

    def __init__(self) -> None:
        super().__init__()
        self.setText(self.tr("Workers: not started"))
        self._ready: set[str] = set()  # alive and warmed up
        self._busy: set[str] = set()  # of those, holding a job now
        self.device: str | None = None  # as the last ready worker reported it
        self.setObjectName("workerStatus")

    def starting(self) -> None:
        self._ready.clear()
        self._busy.clear()
        self.setText(self.tr("Workers: starting (loading the model)…"))

    def handle(self, message: WorkerMessage) -> None:
        worker = message.worker_id
        if message.kind is MessageKind.READY:
            self._ready.add(worker)
            self.device = message.device or self.device
        elif message.kind is MessageKind.EXITING:
            self._ready.discard(worker)
            self._busy.discard(worker)
        elif message.kind is MessageKind.STARTED:
            self._ready.add(worker)
            self._busy.add(worker)
        elif message.kind is MessageKind.FINISHED:
            self._busy.discard(worker)
        else:
            return
        self.setText(self.words())

    def words(self) -> str:
        """ "2 workers ready" only when both are free: busy ones are counted as busy."""
        n, busy = len(self._ready), len(self._busy & self._ready)
        idle = n - busy
        if n == 0:
            return self.tr("Workers: restarting…")
        if busy == 0:
            return self.tr("1 worker ready") if n == 1 else self.tr("{n} workers ready").format(n=n)
        if idle == 0:
            return self.tr("1 worker busy") if n == 1 else self.tr("{n} workers busy").format(n=n)
        return self.tr("{busy} busy, {idle} ready").format(busy=busy, idle=idle)
