"""The supervisor: runs the worker processes and keeps every job's status honest.

Used by the GUI (call `poll()` from a timer) and the CLI. No Qt, no torch: workers are
spawned processes, so a crash or out-of-memory in the model never takes the app down.

    supervisor = Supervisor.for_app(queue, settings)
    report = supervisor.start()          # recovery first (unless told not to), then the workers
    ...every 100-250 ms: messages = supervisor.poll()
    supervisor.shutdown(timeout=30)      # pauses running jobs, then stops the workers

`poll()` never blocks. It drains the workers' messages, restarts dead workers (settling
the job a dead worker held through the table), kills a worker that does not stop within
the cancel grace period after its job went CANCELLING or PAUSING, and now and then runs
a maintenance pass (`maintenance.MaintenancePass`: the watchdog, the retry policy and the
graph's reconciliation), killing its own worker when the watchdog finds that worker frozen.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue as stdlib_queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy
from app.engine.jobs.states import JobStatus, TransitionNotAllowed
from app.engine.settings import Settings
from app.engine.workers.liveness import WorkerIdentity, new_token, remove_lock, this_host
from app.engine.workers.maintenance import MaintenancePass
from app.engine.workers.messages import MessageKind, WorkerMessage
from app.engine.workers.recovery import RecoveryReport, recover
from app.engine.workers.watchdog import TimedOut, settle_lost_job
from app.engine.workers.worker import (
    EXIT_LEFT_ON_REQUEST,
    EXIT_STUCK,
    WorkerConfig,
    database_file,
    threads_per_worker,
    worker_process_main,
)
from app.errors import DatabaseUnreachable, EaselError
from app.models.tables import Job

log = logging.getLogger(__name__)

SOURCE = "supervisor"
MAX_RESTART_DELAY_S = 30.0
IDLE_WORKER_EXIT_S = 1.0  # in shutdown, a worker holding no job gets this long to exit itself
KILL_JOIN_S = 5.0


@dataclass
class _Slot:
    """One worker position; its process is replaced when it dies."""

    index: int
    token: str = ""
    process: BaseProcess | None = None
    worker_id: str | None = None  # the id it claims with (see `worker.run_worker`)
    stop: Event | None = None
    ready: bool = False
    failed_starts: int = 0  # deaths before READY in a row: a broken install, back off
    # Its worker left when asked to (Workers panel: drain, stop), or found no more work
    # (`until_idle`): nobody takes its place.
    retired: bool = False
    start_at: float = 0.0

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()


@dataclass
class Supervisor:
    queue: JobQueue
    config: WorkerConfig
    settings: Settings
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    workers: int = 0  # 0: settings.workers
    maintenance_interval_s: float = 1.0
    # None: the queue's clock, the store's time, which heartbeats and `updated_at` are in.
    clock: Callable[[], float] | None = None
    # False: the caller ran launch recovery itself (the window does, and shows its report).
    recover_at_start: bool = True

    def __post_init__(self) -> None:
        self._now = self.clock or self.queue.clock
        count = self.workers or self.settings.workers
        self._slots = [_Slot(i) for i in range(count)]
        self._context = multiprocessing.get_context("spawn")
        self._inbox: stdlib_queue.SimpleQueue[WorkerMessage] = stdlib_queue.SimpleQueue()
        self._held: WorkerMessage | None = None  # taken by `wait_for_message`, not yet handed on
        self._maintenance = MaintenancePass(
            self.queue, self.settings.heartbeat_timeout_s, self.policy,
            undo_source=SOURCE, on_timed_out=self._kill_frozen_worker,
        )  # fmt: skip
        self._next_maintenance = 0.0
        self._started = False
        self._stopping = False

    @classmethod
    def for_app(
        cls,
        queue: JobQueue,
        settings: Settings,
        *,
        workers: int = 0,
        recover_at_start: bool = True,
        **config: Any,
    ) -> Supervisor:
        """Workers on the queue's own database, configured from the user's settings.

        `config`: `WorkerConfig` fields to override (e.g. `outputs_dir`, `only_job`).
        """
        config.setdefault("torch_threads", threads_per_worker(workers or settings.workers))
        worker_config = WorkerConfig.from_settings(settings, database_file(queue), **config)
        return cls(
            queue, worker_config, settings, workers=workers, recover_at_start=recover_at_start
        )

    # --- the public API ----------------------------------------------------------------------

    def start(self) -> RecoveryReport:
        """Recover what the last run left behind, then start the workers; what recovery did.

        With `recover_at_start` off, only the workers start and the report is empty: the
        caller ran launch recovery itself, before this (as the window does)."""
        if self._started:
            raise RuntimeError("the supervisor was already started")
        report = self._recover() if self.recover_at_start else RecoveryReport()
        self._started = True
        self._start_due_workers(self._now())
        return report

    def _recover(self) -> RecoveryReport:
        return recover(
            self.queue, liveness_dir=Path(self.config.liveness_dir),
            heartbeat_timeout_s=self.settings.heartbeat_timeout_s, policy=self.policy,
        )  # fmt: skip

    def poll(self) -> list[WorkerMessage]:
        """Everything that needs doing now, without blocking; returns the workers' messages."""
        messages = self._drain()
        now = self._now()
        try:
            self._reap(now)
            self._enforce_grace(now)
            if now >= self._next_maintenance:
                self._maintain(now)
        except EaselError as error:
            if not error.transient:
                raise
            # A lock held elsewhere or a full disk: nothing was settled half way (each
            # settle is one transaction, and a reaped slot is forgotten only after it), so
            # the next poll simply tries again. A server away is said once per outage, by
            # the database itself (`Outage`), not once per poll.
            if isinstance(error, DatabaseUnreachable):
                log.debug("supervisor: %s; trying again at the next poll", error)
            else:
                log.warning("supervisor: %s; trying again at the next poll", error)
        if not self._stopping:
            self._start_due_workers(now)
        return messages

    def shutdown(self, timeout: float = 30.0, *, pause_running: bool = True) -> list[int]:
        """Pause running jobs (they resume at the next launch), stop workers; paused job ids.

        Blocks for at most about `timeout` (+ the cancel grace period): a worker that does
        not reach a checkpoint in time is killed and its job settled through the table.
        """
        self._stopping = True
        for slot in self._slots:
            if slot.stop is not None:
                slot.stop.set()
        paused = self._pause_own_jobs() if pause_running else []
        deadline = time.monotonic() + timeout
        begun = time.monotonic()
        while any(slot.alive for slot in self._slots) and time.monotonic() < deadline:
            self._drain()
            now = self._now()
            self._enforce_grace(now)
            if time.monotonic() - begun > IDLE_WORKER_EXIT_S:
                self._kill_idle_workers()  # e.g. still importing torch: nothing to lose
            self._reap(now)
            time.sleep(0.05)
        for slot in self._slots:
            if slot.alive:
                self._kill(slot)
        self._drain()
        self._reap(self._now())
        return paused

    def worker_ids(self) -> list[str]:
        return [wid for slot in self._slots if slot.alive and (wid := slot.worker_id)]

    def own_running_ids(self) -> list[int]:
        """The running jobs this supervisor's workers hold; other programs' on the same queue
        (a second window, a headless worker) are theirs to pause, not ours."""
        return [job.id for job in self._own_running_jobs() if job.id is not None]

    def worker_pids(self) -> list[int]:
        return [pid for slot in self._slots if slot.alive and (pid := slot.pid)]

    @property
    def all_retired(self) -> bool:
        """Every worker left for good (drained, stopped, or idle with `until_idle`)."""
        return all(slot.retired for slot in self._slots)

    # --- workers -----------------------------------------------------------------------------

    @property
    def start_failures(self) -> int:
        """How many times in a row every worker died before it was ready (0: all is well).

        Above a few, the install or the model is broken: restarting will not help, and the
        app should say so instead of waiting."""
        return min((slot.failed_starts for slot in self._slots), default=0)

    def _start_due_workers(self, now: float) -> None:
        for slot in self._slots:
            if slot.process is None and now >= slot.start_at and not slot.retired:
                self._spawn(slot)

    def _spawn(self, slot: _Slot) -> None:
        reader, writer = self._context.Pipe(duplex=False)
        slot.token = new_token()
        slot.stop = self._context.Event()
        # Every worker of this supervisor runs on the one device: they share its memory.
        config = replace(self.config, device_workers=len(self._slots))
        slot.process = self._context.Process(
            target=worker_process_main,
            args=(config, slot.token, writer, slot.stop),
            name=f"easel-worker-{slot.index}",
            daemon=True,
        )
        slot.process.start()
        writer.close()  # the child holds its own end: a dead child then reads as EOF
        # Known without asking the worker, so a worker that dies at once is still accounted.
        # As the worker names itself (see `worker.run_worker`): --name, if given, is its host.
        host = self.config.name or this_host()
        slot.worker_id = str(WorkerIdentity(host, slot.process.pid or 0, slot.token))
        slot.ready = False
        # One pipe per worker, not a shared multiprocessing.Queue: a worker SIGKILLed while
        # holding a shared queue's lock would wedge every other worker's messages. A thread
        # per pipe, because recv() blocks on half a message from a frozen worker.
        threading.Thread(
            target=_forward_messages, args=(reader, self._inbox), name="worker-pipe", daemon=True
        ).start()
        log.info("started worker %s", slot.worker_id)

    def messages(self) -> list[WorkerMessage]:
        """The workers' messages so far, without the rest of `poll` (no store reads)."""
        return self._drain()

    def wait_for_message(self, timeout_s: float) -> None:
        """Block until a worker says something or `timeout_s` passes; what it said is the
        next `messages` or `poll`'s (a caller that sleeps between polls hears a FINISHED
        only at its next poll; one that waits here hears it at once)."""
        if self._held is not None or timeout_s <= 0:
            return
        try:
            self._held = self._inbox.get(timeout=timeout_s)
        except stdlib_queue.Empty:
            return

    def _drain(self) -> list[WorkerMessage]:
        messages: list[WorkerMessage] = []
        if self._held is not None:
            self._note(self._held)
            messages.append(self._held)
            self._held = None
        while True:
            try:
                message = self._inbox.get_nowait()
            except stdlib_queue.Empty:
                return messages
            self._note(message)
            messages.append(message)

    def _note(self, message: WorkerMessage) -> None:
        slot = self._slot_of(message.worker_id)
        if message.kind is MessageKind.READY and slot is not None:
            slot.ready, slot.failed_starts = True, 0

    def _reap(self, now: float) -> None:
        for slot in self._slots:
            if slot.process is None or slot.process.is_alive():
                continue
            worker_id, code = slot.worker_id, slot.process.exitcode
            # Drained or stopped from the Workers panel or `workers`, or idle with
            # `until_idle` (it exits 0 only then, or when we stop it): none in its place.
            slot.retired = code == EXIT_LEFT_ON_REQUEST or (code == 0 and self.config.until_idle)
            if slot.retired:
                log.info("worker %s left (code %s)", worker_id, code)
            elif code == EXIT_STUCK:
                log.warning("worker %s ended with its job stuck; starting another", worker_id)
            elif not self._stopping:
                log.warning("worker %s exited with code %s", worker_id, code)
            self._settle_jobs_of(worker_id, f"worker {worker_id} exited (code {code})")
            remove_lock(Path(self.config.liveness_dir), slot.token)
            self._forget(slot, now)
            self._next_maintenance = now  # let the retry policy requeue its job right away

    def _forget(self, slot: _Slot, now: float) -> None:
        if slot.process is not None:
            slot.process.close()
        if not slot.ready:
            slot.failed_starts += 1
        delay = 0.0 if slot.ready else min(MAX_RESTART_DELAY_S, 0.5 * 2**slot.failed_starts)
        slot.process, slot.worker_id, slot.stop, slot.ready = None, None, None, False
        slot.start_at = now + delay

    def _kill(self, slot: _Slot) -> None:
        if slot.process is not None and slot.process.is_alive():
            slot.process.kill()
            slot.process.join(KILL_JOIN_S)

    def _slot_of(self, worker_id: str | None) -> _Slot | None:
        return next((s for s in self._slots if worker_id and s.worker_id == worker_id), None)

    def _kill_idle_workers(self) -> None:
        holders = {job.worker_id for job in self.queue.running_jobs()}
        for slot in self._slots:
            if slot.alive and slot.worker_id not in holders:
                self._kill(slot)

    # --- keeping statuses honest -------------------------------------------------------------

    def _settle_jobs_of(self, worker_id: str | None, message: str) -> None:
        for job in self.queue.running_jobs():
            if worker_id and job.worker_id == worker_id:
                settle_lost_job(self.queue, job, source=SOURCE, message=message)

    def _enforce_grace(self, now: float) -> None:
        """Kill a worker that did not reach a step checkpoint in time after cancel or pause."""
        grace = self.settings.cancel_grace_s
        for job in self.queue.running_jobs():
            slot = self._slot_of(job.worker_id)
            stopping = JobStatus(job.status).is_stopping
            if not stopping or slot is None or now - job.updated_at <= grace:
                continue
            self._kill(slot)
            message = f"worker did not stop within {grace:g}s of {job.status}; killed"
            settle_lost_job(self.queue, job, source=SOURCE, message=message)

    def _maintain(self, now: float) -> None:
        self._maintenance.run(now)  # skipped while the database is away: the next one tries
        self._next_maintenance = now + self.maintenance_interval_s

    def _kill_frozen_worker(self, timed_out: TimedOut) -> None:
        # One of ours, alive but silent: frozen. Kill it; its replacement starts clean.
        if (slot := self._slot_of(timed_out.job.worker_id)) is not None:
            self._kill(slot)

    def _pause_own_jobs(self) -> list[int]:
        paused = []
        for job in self._own_running_jobs():
            try:
                record = self.queue.pause(job.id or 0, source=SOURCE, message="the app is closing")
            except TransitionNotAllowed:
                continue  # finished or settled meanwhile
            if record.to_status in (JobStatus.PAUSING, JobStatus.PAUSED):
                paused.append(record.job_id)
        return paused

    def _own_running_jobs(self) -> list[Job]:
        ours = set(self.worker_ids())
        return [job for job in self.queue.running_jobs() if job.worker_id in ours]


def _forward_messages(conn: Connection, inbox: stdlib_queue.SimpleQueue[WorkerMessage]) -> None:
    """Pass one worker's messages on until its pipe closes (it exited or was killed)."""
    with conn:
        try:
            while True:
                inbox.put(conn.recv())
        except (EOFError, OSError):
            return
