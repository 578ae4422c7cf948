"""A worker's own row in the worker table: who it is, what it does, and what it is asked.

The worker writes its row when it starts, whenever its state changes (idle, busy, draining,
stopping, exited), and on a slow beat from a thread of its own, also while idle; the beat
reads back a drain or stop request in the same statement. Nothing here runs on the denoise
loop. The row is for people (the Workers panel, `workers`): a failed write is logged and
forgotten, never a reason to fail a job; nor does a write wait for the disk (SQLite's
`synchronous=NORMAL` for it, as a claim's): a power cut that undoes one also ended the
worker that wrote it. They are written between a worker's jobs, two for each job.

Old rows are forgotten when a worker starts: exited or lost for `FORGET_AFTER_S`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import delete, insert, update

from app.engine.workers.database_watch import DatabaseFileReplaced
from app.engine.workers.worker_states import WorkerRequest, WorkerState
from app.errors import DatabaseUnreachable, EaselError
from app.models.db import Database
from app.models.tables import WORKER

log = logging.getLogger(__name__)

FORGET_AFTER_S = 7 * 86400.0
BEAT_MAX_S = 5.0  # the slowest beat: the panel's "last heartbeat" stays a few seconds old


class Presence:
    def __init__(
        self,
        db: Database,
        worker_id: str,
        machine: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.worker_id = worker_id
        self.machine = machine
        self._clock = clock
        self._failing = False
        self._device: str | None = None

    def register(self, *, device: str | None) -> None:
        """The row for this process (state STARTING); rows gone for a week are forgotten."""
        self._device = device
        now = self._clock()
        row = self._row(WorkerState.STARTING)
        with self._quietly("register"), self.db.write(synced=False) as conn:
            conn.execute(delete(WORKER).where(WORKER.c.last_seen_at < now - FORGET_AFTER_S))
            conn.execute(insert(WORKER).values(**row))

    def update(self, state: WorkerState, **changes: Any) -> None:
        """A new state (and e.g. the job in hand, the model, the count), heard of now."""
        values = {"state": state.value, "last_seen_at": self._clock(), **changes}
        with self._quietly(state.value), self.db.write(synced=False) as conn:
            conn.execute(update(WORKER).where(WORKER.c.id == self.worker_id).values(**values))

    def beat(self, state: WorkerState) -> tuple[WorkerRequest, str] | None:
        """Say we are alive, in `state` (it also mends a state written out of order by the
        other thread); the drain or stop request on our row and who made it, if any."""
        statement = (
            update(WORKER)
            .where(WORKER.c.id == self.worker_id)
            .values(last_seen_at=self._clock(), state=state.value)
            .returning(WORKER.c.request, WORKER.c.requested_by)
        )
        with self._quietly("beat"), self.db.write(synced=False) as conn:
            found = conn.execute(statement).first()
            if found is None:  # never written (the server was away at start), or forgotten
                conn.execute(insert(WORKER).values(**self._row(state)))
            elif found.request:
                return WorkerRequest(found.request), found.requested_by or "another program"
        return None

    def _row(self, state: WorkerState) -> dict[str, Any]:
        now = self._clock()
        return {
            "id": self.worker_id, "machine": self.machine, "device": self._device,
            "state": state.value, "started_at": now, "last_seen_at": now, "jobs_done": 0,
        }  # fmt: skip

    @contextmanager
    def _quietly(self, what: str) -> Iterator[None]:
        """Log a store error once per outage (the server may be away for minutes); carry on."""
        try:
            yield
        except EaselError as error:
            # A server that is away is said once by the database itself (`Outage`), a file
            # replaced under us once by the worker (`Worker.database_replaced`).
            said = isinstance(error, DatabaseUnreachable | DatabaseFileReplaced)
            if not self._failing and not said:
                log.warning("worker row not written (%s): %s", what, error)
            self._failing = True
        else:
            self._failing = False
