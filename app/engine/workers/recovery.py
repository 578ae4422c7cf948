"""Recovery at launch: settle the jobs left running by workers that are gone.

Runs before any worker starts. A job in PROCESSING, CANCELLING or PAUSING whose worker is
not alive goes through the table with TIMEOUT (so a cancel still wins and a pause keeps its
checkpoint), then the retry policy decides what to requeue. Liveness is checked by worker
identity (see `liveness`: a worker of this host is judged by its lock wherever its data
folder is, so `recover` from one data folder of a shared queue never takes a live job of a
worker started from another), and by heartbeat age for workers on other hosts.

A worker on this host that is alive (its lock is held) but whose heartbeat is stale is
hung (stopped, stuck in a driver call): it is killed first, so it can never wake up and
write, and its job is then settled like any other lost job.

A write lock held by another program (a long `db` command, an sqlite3 shell) is waited
out by `recover_when_unlocked`: the launch goes on once the lock is free, instead of
failing with "locked". `recover` makes one try, for callers that wait in their own way
(the window's worker feed retries with backoff and says so in its banner).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from app.engine.jobs.graph import reconcile
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy, apply_retry_policy
from app.engine.jobs.states import JobStatus
from app.engine.jobs.undo import complete_pending_cancels
from app.engine.store.stored_files import saved_step_reader
from app.engine.workers.liveness import (
    WorkerIdentity,
    is_alive,
    machine_dir,
    remove_stale_locks,
)
from app.engine.workers.watchdog import settle_lost_job
from app.errors import DatabaseLocked
from app.models.tables import JOB, TRANSITION, Job

log = logging.getLogger(__name__)

SOURCE = "recovery"
# Windows has no SIGKILL; there SIGTERM is TerminateProcess, which cannot be ignored either.
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)
LOCK_RETRY_S = 0.5  # between tries while another program holds the write lock
WAITING_FOR_THE_LOCK = (
    "another program holds the job database's write lock; recovery waits until it is free"
)


class Holder(Enum):
    ALIVE = "alive"
    GONE = "gone"
    HUNG = "hung"  # alive on this host, but silent for longer than the heartbeat timeout


@dataclass
class RecoveryReport:
    """What recovery did, with job ids, for the GUI to show ("restored 3 jobs ...")."""

    requeued: list[int] = field(default_factory=list)
    paused: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    given_up: list[int] = field(default_factory=list)
    quarantined: list[int] = field(default_factory=list)  # also in given_up
    hung: list[int] = field(default_factory=list)  # their worker was hung and was killed
    still_running: list[int] = field(default_factory=list)  # their worker is alive
    unblocked: list[int] = field(default_factory=list)  # parents had succeeded before a crash

    @property
    def is_empty(self) -> bool:
        return not (
            self.requeued or self.paused or self.cancelled or self.given_up or self.unblocked
        )

    def lines(self) -> list[str]:
        """One human line per non-empty group."""
        groups = [
            ("requeued", self.requeued), ("paused", self.paused),
            ("cancelled", self.cancelled), ("given up", self.given_up),
            ("quarantined", self.quarantined), ("hung worker stopped", self.hung),
            ("still running elsewhere", self.still_running), ("unblocked", self.unblocked),
        ]  # fmt: skip
        return [f"{label}: {_ids(ids)}" for label, ids in groups if ids]


def recover(
    queue: JobQueue,
    *,
    liveness_dir: Path,
    heartbeat_timeout_s: float,
    policy: RetryPolicy,
    now: float | None = None,
) -> RecoveryReport:
    """Settle the jobs left running by workers that are gone; what was done. A write lock
    held elsewhere for longer than the database's lock timeout raises `DatabaseLocked`
    (each job settled so far stays settled); `recover_when_unlocked` waits it out."""
    report = RecoveryReport()
    now = queue.clock() if now is None else now
    _recover_into(report, queue, liveness_dir, heartbeat_timeout_s, policy, now)
    return report


def paused_when_window_gone(queue: JobQueue, since: float) -> list[int]:
    """Jobs still PAUSED that their own worker paused after `since` because the window that
    started it was gone (`WINDOW_GONE_REASON`): what a launch after a killed window tells."""
    from sqlalchemy import select

    from app.engine.workers.worker_states import WINDOW_GONE_REASON

    query = (
        select(TRANSITION.c.job_id)
        .join(JOB, JOB.c.id == TRANSITION.c.job_id)
        .where(
            TRANSITION.c.message == WINDOW_GONE_REASON,
            TRANSITION.c.at >= since,
            JOB.c.status == JobStatus.PAUSED.value,
        )
        .distinct()
        .order_by(TRANSITION.c.job_id)
    )
    with queue.db.read() as conn:
        return [int(job_id) for (job_id,) in conn.execute(query)]


def recover_when_unlocked(
    queue: JobQueue,
    *,
    liveness_dir: Path,
    heartbeat_timeout_s: float,
    policy: RetryPolicy,
    on_lock_wait: Callable[[str], None] | None = None,
) -> RecoveryReport:
    """`recover`, waiting out a write lock that another program holds instead of failing
    the launch: each job is settled in a transaction of its own, so a try that met the
    lock left nothing half done, and the next try (every `LOCK_RETRY_S`, each waiting the
    database's own lock timeout) goes on from what is still to do. `on_lock_wait` is told
    why it waits, once."""
    report = RecoveryReport()
    waited = False
    while True:
        try:
            _recover_into(
                report, queue, liveness_dir, heartbeat_timeout_s, policy, queue.clock()
            )  # fmt: skip
            return report
        except DatabaseLocked as error:
            if not waited:
                log.warning("%s (%s)", WAITING_FOR_THE_LOCK, error)
                if on_lock_wait is not None:
                    on_lock_wait(WAITING_FOR_THE_LOCK)
                waited = True
            time.sleep(LOCK_RETRY_S)


def _recover_into(
    report: RecoveryReport,
    queue: JobQueue,
    liveness_dir: Path,
    heartbeat_timeout_s: float,
    policy: RetryPolicy,
    now: float,
) -> None:
    """One try; adds to `report` (so what an interrupted try did is still reported)."""
    for job in queue.running_jobs():
        holder = holder_state(job, liveness_dir, heartbeat_timeout_s, now)
        if holder is Holder.ALIVE:
            if job.id not in report.still_running:
                report.still_running.append(job.id or 0)
            continue
        message = f"worker {job.worker_id} is gone (found at launch)"
        if holder is Holder.HUNG:
            silent_s = now - (job.heartbeat_at or 0.0)
            message = f"worker {job.worker_id} hung (no heartbeat for {silent_s:.0f}s); stopped it"
            _kill_hung_worker(job)
            report.hung.append(job.id or 0)
        record = settle_lost_job(queue, job, source=SOURCE, message=message)
        if record is not None and record.to_status is JobStatus.PAUSED:
            report.paused.append(record.job_id)
        elif record is not None and record.to_status is JobStatus.CANCELLED:
            report.cancelled.append(record.job_id)
    # Also decides failures left undecided by an app that died before its policy ran.
    decisions = apply_retry_policy(queue, policy, now=now, saved_step=saved_step_reader(queue.db))
    report.requeued += decisions.requeued
    report.given_up += decisions.given_up
    report.quarantined += decisions.quarantined
    # Children whose parents finished while the app died between the two commits.
    reconciled = reconcile(queue, source=SOURCE)
    report.unblocked += reconciled.unblocked
    report.cancelled += reconciled.cancelled
    # Cancels whose undo time ran out while the window that offered Undo was gone.
    report.cancelled += complete_pending_cancels(queue, now, source=SOURCE)
    for folder in (liveness_dir, machine_dir()):
        remove_stale_locks(folder)


def holder_state(job: Job, liveness_dir: Path, heartbeat_timeout_s: float, now: float) -> Holder:
    fresh = now - (job.heartbeat_at or 0.0) <= heartbeat_timeout_s
    identity = WorkerIdentity.parse(job.worker_id)
    if identity is not None and identity.is_local:
        if not is_alive(identity, liveness_dir):
            return Holder.GONE
        return Holder.ALIVE if fresh or identity.pid == os.getpid() else Holder.HUNG
    # Another host (or an id we cannot check): trust a fresh heartbeat.
    return Holder.ALIVE if fresh else Holder.GONE


def _kill_hung_worker(job: Job) -> None:
    identity = WorkerIdentity.parse(job.worker_id)
    assert identity is not None  # only local identities are ever HUNG
    try:
        os.kill(identity.pid, KILL)  # its lock is held, so this pid is that worker
    except ProcessLookupError:
        return  # it died meanwhile: all the same
    log.warning("killed hung worker %s (job %s)", job.worker_id, job.id)


def _ids(ids: list[int]) -> str:
    return ", ".join(f"#{i}" for i in ids)
