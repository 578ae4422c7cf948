"""How a worker hears of changes: woken by the database when it can (PostgreSQL
LISTEN/NOTIFY; on SQLite the file's commit counter, looked at many times a second), by a
poll otherwise.

Two uses: an idle worker waits for work, and a running job's step checkpoint learns of a
cancel or pause. A wake-up is only a hint to look again; the job table stays the truth. So
the poll never goes away: with wake-ups it just slows down to a fallback that catches a
notification lost while the server restarted.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

from app.engine.jobs.changes import ChangeWatcher
from app.errors import DatabaseError
from app.models.db import Database

SLOW_POLL_S = 5.0  # with wake-ups, the fallback poll (claims are cheap, but not free)
# With wake-ups, a running job's row is still read at least this often: a notification lost
# to a server restart delays a cancel by at most this, and a worker that lost its job (which
# writes nothing) notices within it.
FALLBACK_READ_S = 1.0
LISTEN_TICK_S = 0.5  # how long the watching thread blocks on the server before looking up
WATCH_S = 0.05  # SQLite: how often an idle worker looks whether anyone committed (it woke this
# often before the counter too, to notice a stop: no more wake-ups than that, for laptops)
# For a while after the worker finished a job it looks far more often: the next job of a
# client that sends one after another (A1111's txt2img, Generate pressed again) comes
# milliseconds after the answer to the last, and waited 45 ms of a 50 ms look on average.
QUICK_WATCH_S = 0.005
QUICK_FOR_S = 1.0


class StepReads(Protocol):
    def due(self) -> bool:
        """Whether the step checkpoint should read the job's row now."""
        ...


class EveryStep:
    """SQLite: the row is a few microseconds away (measured 8 µs): read it at every step."""

    def due(self) -> bool:
        return True


class Wakeup(Protocol):
    def poll_s(self, idle_poll_s: float) -> float:
        """How long an idle worker waits before looking again anyway."""
        ...

    def wait(self, timeout_s: float) -> bool:
        """Block up to `timeout_s`; True when woken (something may be there to do)."""
        ...

    def watching(self, job_id: int) -> AbstractContextManager[StepReads]:
        """While `job_id` runs here: when its step checkpoint should read its row."""
        ...

    def quicken(self) -> None:
        """The worker just finished a job: the next may follow within milliseconds."""
        ...

    def close(self) -> None: ...


class Sleeper:
    """SQLite: one file on one machine; polling it costs microseconds."""

    def poll_s(self, idle_poll_s: float) -> float:
        return idle_poll_s

    def wait(self, timeout_s: float) -> bool:
        time.sleep(timeout_s)
        return False

    def quicken(self) -> None:
        pass  # it never wakes early

    def watching(self, job_id: int) -> AbstractContextManager[StepReads]:
        return contextlib.nullcontext(EveryStep())

    def close(self) -> None:
        pass


class CommitWakeup:
    """SQLite: no server announces new work, but the file says whether anyone (any process
    on this machine) committed since the last look (`ChangeWatcher`: about 20 µs a look).
    An idle worker looks every `WATCH_S` (every `QUICK_WATCH_S` for `QUICK_FOR_S` after it
    finished a job) and claims once something was committed, so a job submitted just after the
    worker found the queue empty starts within milliseconds, not at its next poll: a
    client that sends one job after another (A1111's txt2img, Generate pressed again)
    lost most of `idle_poll_s` on each. The poll stays as the fallback."""

    def __init__(self, db: Database) -> None:
        self._watcher = ChangeWatcher(db)
        self._quick_until = -float("inf")  # looks every QUICK_WATCH_S until then
        # Where the counter stood before the worker's first claim, and later at the last
        # look, which is always before the claim that followed it: a commit landing between
        # a claim that found nothing and the next wait is still seen as news.
        self._seen = self._look()

    def _look(self) -> int | None:
        try:
            return self._watcher.version()
        except DatabaseError:
            return None

    def poll_s(self, idle_poll_s: float) -> float:
        return idle_poll_s

    def wait(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            version = self._look()
            if version is None:  # the poll's claim meets the error, and reports it
                time.sleep(max(0.0, deadline - time.monotonic()))
                return False
            changed = self._seen is not None and version != self._seen
            self._seen = version
            now = time.monotonic()
            left = deadline - now
            if changed or left <= 0:
                return changed
            watch_s = QUICK_WATCH_S if now < self._quick_until else WATCH_S
            time.sleep(min(watch_s, left))

    def quicken(self) -> None:
        self._quick_until = time.monotonic() + QUICK_FOR_S

    def watching(self, job_id: int) -> AbstractContextManager[StepReads]:
        return contextlib.nullcontext(EveryStep())

    def close(self) -> None:
        self._watcher.close()


class DatabaseWakeup:
    """PostgreSQL: a new job, a resume, a retry, a cancel or a pause wakes every worker."""

    def __init__(self, db: Database) -> None:
        from app.models.postgres import JobListener

        self._listener = JobListener(db)
        # Running jobs listen on a connection and thread of their own, started with the
        # first job, so the idle wait above and the step loop never share a connection.
        self._job_listener = JobListener(db)
        self._job_watch: JobWatch | None = None

    def poll_s(self, idle_poll_s: float) -> float:
        return max(idle_poll_s, SLOW_POLL_S)

    def wait(self, timeout_s: float) -> bool:
        return bool(self._listener.wait(timeout_s))

    def quicken(self) -> None:
        pass  # the server's notifications wake it at once anyway

    @contextlib.contextmanager
    def watching(self, job_id: int) -> Iterator[StepReads]:
        if self._job_watch is None:
            self._job_watch = JobWatch(self._job_listener.wait)
        with self._job_watch.watching(job_id) as reads:
            yield reads

    def close(self) -> None:
        if self._job_watch is not None:
            self._job_watch.close()
        self._listener.close()
        self._job_listener.close()


class JobWatch:
    """A thread that hears the notifications naming the running job (a cancel, a pause, a
    watchdog's retry): its step checkpoint then reads the row at the next step, and
    otherwise only every `FALLBACK_READ_S`, so most steps make no round trip to the server
    (measured 0.8 ms per read on loopback, against a few ms for a whole 64x64 step)."""

    def __init__(
        self,
        listen: Callable[[float], list[str]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._listen = listen
        self._clock = clock
        self._job_prefix: str | None = None  # payloads are "<job id> <status>"
        self._named = threading.Event()
        self._closed = threading.Event()
        self._last_read = -float("inf")
        self._thread = threading.Thread(target=self._hear, name="job-watch", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def watching(self, job_id: int) -> Iterator[StepReads]:
        self._job_prefix, self._last_read = f"{job_id} ", -float("inf")
        self._named.clear()
        try:
            yield self
        finally:
            self._job_prefix = None

    def due(self) -> bool:
        now = self._clock()
        if not self._named.is_set() and now - self._last_read < FALLBACK_READ_S:
            return False
        # Cleared before the read: a notification arriving meanwhile asks for another one.
        self._named.clear()
        self._last_read = now
        return True

    def close(self) -> None:
        self._closed.set()
        self._thread.join(LISTEN_TICK_S + 1.0)

    def _hear(self) -> None:
        while not self._closed.is_set():
            payloads = self._listen(LISTEN_TICK_S)
            prefix = self._job_prefix
            if prefix is not None and any(p.startswith(prefix) for p in payloads):
                self._named.set()


def wakeup_for(db: Database) -> Wakeup:
    """Woken by the store: its notifications (PostgreSQL) or its commit counter (SQLite)."""
    if db.dialect.notify_sql is not None:
        return DatabaseWakeup(db)
    return CommitWakeup(db) if db.is_sqlite else Sleeper()
