"""What every worker runs beside its jobs, so a fleet with no window still recovers its jobs.

A headless worker (`python -m app worker`, on any machine) runs the watchdog, the retry
policy and the graph's reconciliation every few seconds, as the app's supervisor does.
Concurrent watchdogs on several machines are safe: each TIMEOUT is a conditional update on
(status, version, worker), so a job is settled once, whoever sees it first. A job whose
worker still heartbeats is never touched, wherever that worker runs.

It also prunes old finished jobs as the settings ask (on its thread's first pass, then
hourly), so a fleet with no window stays pruned; the settings file is read for each prune.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from app.engine.history.auto_prune import PruneSchedule, prune_by_settings
from app.engine.jobs.graph import reconcile
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy, apply_retry_policy
from app.engine.jobs.undo import complete_pending_cancels
from app.engine.settings import PRUNE_EVERY_S, Settings
from app.engine.workers.watchdog import time_out_stale_jobs
from app.errors import DatabaseError

log = logging.getLogger(__name__)

SOURCE = "worker watchdog"


class Maintenance:
    """The watchdog and the retry policy on a thread: `with Maintenance(...): run_worker(...)`."""

    def __init__(
        self,
        queue: JobQueue,
        *,
        heartbeat_timeout_s: float,
        policy: RetryPolicy,
        settings: Callable[[], Settings] | None = None,
        prune_every_s: float = PRUNE_EVERY_S,
    ) -> None:
        """`settings`: where the retention settings come from (None: never prune)."""
        self.queue = queue
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.policy = policy
        self.settings = settings
        self.prunes = PruneSchedule(prune_every_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="maintenance", daemon=True)

    def __enter__(self) -> Maintenance:
        self.run_once()  # before the first claim: a job stranded by a dead worker goes first
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.interval_s + 5.0)

    @property
    def interval_s(self) -> float:
        return self.heartbeat_timeout_s / 2

    def run_once(self) -> None:
        now = time.time()
        try:
            for timed_out in time_out_stale_jobs(
                self.queue, self.heartbeat_timeout_s, now=now, source=SOURCE
            ):
                log.info("job %s: %s", timed_out.record.job_id, timed_out.record.message)
            apply_retry_policy(self.queue, self.policy, now=now)
            # Children stranded by a worker that died between its parent's commit and the
            # UNBLOCK (or cascade cancel): no launch recovery or supervisor runs in a fleet.
            reconcile(self.queue, source=SOURCE)
            complete_pending_cancels(self.queue, now, source=SOURCE)  # held by a window now gone
        except DatabaseError as error:  # the server is away: the next pass tries again
            log.warning("watchdog pass skipped: %s", error)

    def prune_if_due(self) -> None:
        if self.settings is None or not self.prunes.due():
            return
        self.prunes.ran()
        try:
            prune_by_settings(self.queue, self.settings())
        except DatabaseError as error:
            log.warning("prune skipped: %s", error)
        except Exception:  # a bug in pruning must not stop the watchdog of this thread
            log.exception("prune failed")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.run_once()
            self.prune_if_due()  # here, not before the first claim: it may take seconds
