"""One clock for a queue: the time every machine on it agrees on.

Heartbeats, the watchdog's "now", `not_before`, the history's times and the worker table are
compared between processes, possibly on different machines. Each machine's own clock may be
minutes off (a worker 10 minutes ahead once timed out every job of a healthy one), so on a
shared queue time comes from the database server. It is asked every `REFRESH_S` and kept as
an offset from this process's monotonic clock, so the hot paths (claims, heartbeats, every
transition) make no round trip for it, and neither a skewed nor a stepped local clock moves
it. A local SQLite file has one machine's clock only: that one, asked directly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from app.errors import DatabaseError
from app.models.db import Database

log = logging.getLogger(__name__)

REFRESH_S = 5.0  # how often the server's time is asked again (drift, not skew, is left)


class StoreClock:
    """`clock()`: the store's time now, in Unix seconds; never earlier than it said before
    in this process, so one process's timeline never runs backwards."""

    def __init__(
        self,
        db: Database,
        *,
        refresh_s: float = REFRESH_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._refresh_s = refresh_s
        self._monotonic = monotonic
        self._local_only = not db.dialect.has_clock  # decided once: the store has no clock
        self._anchor: tuple[float, float] | None = None  # (server time, monotonic then)
        self._next_refresh = -float("inf")
        self._said = -float("inf")  # the latest time handed out
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()

    def __call__(self) -> float:
        if self._local_only:
            return time.time()
        now = self._monotonic()
        if now >= self._next_refresh:
            self._refresh()
        anchor = self._anchor
        # Before the server ever answered (away at start): the local clock, the best there is.
        at = time.time() if anchor is None else anchor[0] + (self._monotonic() - anchor[1])
        with self._lock:
            self._said = at = max(at, self._said)
        return at

    @property
    def offset_s(self) -> float | None:
        """How far the store's clock is ahead of this machine's (None: not known yet)."""
        anchor = self._anchor
        if anchor is None:
            return None
        return anchor[0] + (self._monotonic() - anchor[1]) - time.time()

    def _refresh(self) -> None:
        if not self._refreshing.acquire(blocking=False):
            return  # another thread is asking: use the anchor we have
        try:
            # Set first: a server that is away is not asked again on every call.
            self._next_refresh = self._monotonic() + self._refresh_s
            before = self._monotonic()
            server = self._db.server_time()
            after = self._monotonic()
        except DatabaseError as error:
            # Away (the database's outage log says so once): the last offset still holds.
            log.debug("the store's time was not read: %s", error)
            return
        finally:
            self._refreshing.release()
        if server is None:
            self._local_only = True
            return
        # The server read its clock somewhere in the round trip: take the middle.
        self._anchor = (server, (before + after) / 2)
