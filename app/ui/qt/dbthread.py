"""Runs store calls off the GUI thread and hands results back on it.

One thread, so requests keep their order (a submit is always visible to the refresh that
follows it). `InlineRunner` does the same synchronously, for model tests.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from PySide6.QtCore import QTimer

from app.engine.logs import log_path
from app.errors import is_user_error, user_message

log = logging.getLogger(__name__)

Done = Callable[[Any], None]
Failed = Callable[[str], None]


class Runner(Protocol):
    def run(self, call: Callable[[], Any], done: Done, failed: Failed | None = None) -> None: ...

    def close(self) -> None: ...


_STOP = object()
DRAIN_MS = 8  # results wait at most this long for the GUI thread: well under a frame


class ThreadRunner:
    """One daemon thread working through a queue of calls; results come back by a timer.

    A daemon thread, not a ThreadPoolExecutor: a call stuck on a dead network drive must
    not keep the app from quitting (`close` waits a bounded time, then lets it be).
    Results return through a plain queue that a GUI-thread timer drains while calls are
    outstanding, not through a cross-thread signal: a Python thread that emits Qt signals
    can deadlock against the GUI thread's garbage collector deleting Qt objects (both
    want the GIL and one of Qt's shared connection locks).
    """

    def __init__(self, name: str = "easel-db", *, start: bool = True) -> None:
        """`start=False`: calls queue up, in order, until `start` (the window's first paint)."""
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._outstanding = 0
        self._drain = QTimer()
        self._drain.setInterval(DRAIN_MS)
        self._drain.timeout.connect(self._deliver)
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._started = False
        if start:
            self.start()

    def start(self) -> None:
        """Work through the calls queued so far, then the rest (once; later calls do nothing)."""
        if not self._started and not self._closed:
            self._started = True
            self._thread.start()

    def run(self, call: Callable[[], Any], done: Done, failed: Failed | None = None) -> None:
        if self._closed:
            return
        self._outstanding += 1
        self._calls.put((call, done, failed))
        if not self._drain.isActive():  # the timer runs only while results are due
            self._drain.start()

    def _work(self) -> None:
        while (item := self._calls.get()) is not _STOP:
            call, done, failed = item
            future: Future[Any] = Future()
            try:
                future.set_result(call())
            except BaseException as error:
                future.set_exception(error)
            self._results.put((future, done, failed))

    def _deliver(self) -> None:
        while not self._closed:
            try:
                future, done, failed = self._results.get_nowait()
            except queue.Empty:
                break
            self._outstanding -= 1
            _settle(future.exception(), future, done, failed)
        if self._outstanding <= 0 or self._closed:
            self._drain.stop()

    def close(self, timeout: float = 5.0) -> None:
        """Finish the call in progress (at most `timeout`), drop the queued ones."""
        self._closed = True
        self._drain.stop()
        while True:
            try:
                self._calls.get_nowait()
            except queue.Empty:
                break
        self._calls.put(_STOP)
        if self._started:
            self._thread.join(timeout)


class InlineRunner:
    """Runs each call at once on the calling thread (tests, scripts)."""

    def run(self, call: Callable[[], Any], done: Done, failed: Failed | None = None) -> None:
        future: Future[Any] = Future()
        try:
            future.set_result(call())
        except Exception as error:
            future.set_exception(error)
        _settle(future.exception(), future, done, failed)

    def close(self) -> None:
        pass


def _settle(
    error: BaseException | None, future: Future[Any], done: Done, failed: Failed | None
) -> None:
    if error is None:
        done(future.result())
        return
    # Bugs are logged with their traceback; the user sees one readable line (and so does the
    # log for what the user can act on: a refused password is no bug).
    if is_user_error(error):
        log.warning("store call refused: %s", error)
    else:
        log.error("store call failed", exc_info=error)
    if failed is not None:
        failed(describe_error(error))


def describe_error(error: BaseException) -> str:
    # A user error is its own sentence; anything else is a bug, logged above with its traceback.
    return user_message(error, log_path("gui"))
