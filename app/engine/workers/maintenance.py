"""One maintenance pass, and the thread that runs it beside a headless worker.

A maintenance pass keeps every job's status honest while workers run: the watchdog (a
stale heartbeat -> TIMEOUT), then the retry policy, then the graph's reconciliation. The
app's supervisor runs one every second or so (`Supervisor.poll`); a headless worker
(`python -m app worker`, on any machine) runs one every few seconds on a thread
(`Maintenance`), so a fleet with no window still recovers its jobs. Both run the same
`MaintenancePass`, with the same error handling.

Concurrent watchdogs on several machines are safe: each TIMEOUT is a conditional update on
(status, version, worker), so a job is settled once, whoever sees it first. A job whose
worker still heartbeats is never touched, wherever that worker runs.

A headless worker also prunes old finished jobs as the settings ask (on its thread's first
pass, then hourly), so a fleet with no window stays pruned; the settings file is read for
each prune.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from app.engine.history.auto_prune import PruneSchedule, prune_by_settings
from app.engine.jobs.graph import RECONCILE_SOURCE, reconcile
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy, apply_retry_policy
from app.engine.jobs.undo import complete_pending_cancels
from app.engine.settings import PRUNE_EVERY_S, Settings
from app.engine.store.stored_files import saved_step_reader
from app.engine.workers.watchdog import SOURCE as WATCHDOG_SOURCE
from app.engine.workers.watchdog import TimedOut, time_out_stale_jobs
from app.errors import DatabaseError, DatabaseUnreachable, EaselError

log = logging.getLogger(__name__)

SOURCE = "worker watchdog"  # a headless worker's pass, in the jobs' history


def _leave_its_worker(_timed_out: TimedOut) -> None:
    """A headless worker's pass: the lost worker is on some machine, out of its reach."""


def skips_the_pass(error: EaselError) -> bool:
    """A store that cannot be read or written now (a lock held elsewhere, a full disk, a
    server away): the pass stops, and the next one tries again. Anything else is a bug."""
    return isinstance(error, DatabaseError) or error.transient


@dataclass(frozen=True)
class MaintenancePass:
    """The watchdog, the retry policy, the graph's reconciliation and the cancels whose undo
    window closed with nobody left to decide, in that order.

    A `DatabaseError` or another transient `EaselError` skips the rest of the pass with one
    log line: every step settles each job in a transaction of its own, so nothing is left
    half done, and the next pass starts over. Any other error is a bug, and is raised.
    """

    queue: JobQueue
    heartbeat_timeout_s: float
    policy: RetryPolicy
    # Who its history rows name as the source of the TIMEOUT and of the reconciliation.
    watchdog_source: str = WATCHDOG_SOURCE
    reconcile_source: str = RECONCILE_SOURCE
    # ... and of the cancel that completes a hold whose window is gone: the pass's owner.
    undo_source: str = SOURCE
    # Called for each job the watchdog timed out (the supervisor kills its frozen worker).
    on_timed_out: Callable[[TimedOut], None] = _leave_its_worker

    def run(self, now: float | None = None) -> bool:
        """One pass; False if it was skipped (see the class)."""
        now = self.queue.clock() if now is None else now
        try:
            self._steps(now)
        except EaselError as error:
            if not skips_the_pass(error):
                raise
            # A server that is away was said once, by the database (`Outage`), not per pass.
            quiet = isinstance(error, DatabaseUnreachable)
            log.log(
                logging.DEBUG if quiet else logging.WARNING,
                "maintenance pass skipped: %s; the next pass tries again", error,
            )  # fmt: skip
            return False
        return True

    def _steps(self, now: float) -> None:
        self._time_out_stale_jobs(now)
        apply_retry_policy(
            self.queue, self.policy, now=now, saved_step=saved_step_reader(self.queue.db)
        )
        # Children stranded by a process that died between its parent's commit and the
        # UNBLOCK (or cascade cancel) wait at most one pass.
        reconcile(self.queue, source=self.reconcile_source)
        # Cancels held for undo by a window that died inside its undo time.
        complete_pending_cancels(self.queue, now, source=self.undo_source)

    def _time_out_stale_jobs(self, now: float) -> None:
        timeout_s = self.heartbeat_timeout_s
        for timed_out in time_out_stale_jobs(
            self.queue, timeout_s, now=now, source=self.watchdog_source
        ):
            log.info("job %s: %s", timed_out.record.job_id, timed_out.record.message)
            self.on_timed_out(timed_out)


class Maintenance:
    """A maintenance pass on a thread: `with Maintenance(...): run_worker(...)`."""

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
        self.one_pass = MaintenancePass(
            queue, heartbeat_timeout_s, policy, watchdog_source=SOURCE, reconcile_source=SOURCE
        )
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
        self.one_pass.run()

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
