"""How an idle worker waits for work: woken by the database when it can (PostgreSQL
LISTEN/NOTIFY), by a poll otherwise.

A wake-up is only a hint to look again; the job table stays the truth. So the poll never
goes away: with wake-ups it just slows down to a fallback that catches a notification lost
while the server restarted.
"""

from __future__ import annotations

import time
from typing import Protocol

from app.models.db import Database

SLOW_POLL_S = 5.0  # with wake-ups, the fallback poll (claims are cheap, but not free)


class Wakeup(Protocol):
    def poll_s(self, idle_poll_s: float) -> float:
        """How long an idle worker waits before looking again anyway."""
        ...

    def wait(self, timeout_s: float) -> bool:
        """Block up to `timeout_s`; True when woken (something may be there to do)."""
        ...

    def close(self) -> None: ...


class Sleeper:
    """SQLite: one file on one machine; polling it costs microseconds."""

    def poll_s(self, idle_poll_s: float) -> float:
        return idle_poll_s

    def wait(self, timeout_s: float) -> bool:
        time.sleep(timeout_s)
        return False

    def close(self) -> None:
        pass


class DatabaseWakeup:
    """PostgreSQL: a new job, a resume, a retry, a cancel or a pause wakes every worker."""

    def __init__(self, db: Database) -> None:
        from app.models.postgres import JobListener

        self._listener = JobListener(db)

    def poll_s(self, idle_poll_s: float) -> float:
        return max(idle_poll_s, SLOW_POLL_S)

    def wait(self, timeout_s: float) -> bool:
        return bool(self._listener.wait(timeout_s))

    def close(self) -> None:
        self._listener.close()


def wakeup_for(db: Database) -> Wakeup:
    return Sleeper() if db.is_sqlite else DatabaseWakeup(db)
