"""The worker: warm up, claim a job, run it with a step checkpoint, settle it; repeat.

A worker is a process of its own (spawn start method, see `supervisor`), or the process of
`python -m app worker`. torch is imported only through `WorkerConfig.runner_factory`,
inside the worker; importing this module stays cheap so the app can configure workers.
Status changes go through the queue's table; the app hears about progress through
`WorkerMessage`s (see `Outbox`).
"""

from __future__ import annotations

import json
import logging
import os
import queue as stdlib_queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from app.engine import paths
from app.engine.jobs.affinity import AffinityBound
from app.engine.jobs.params import DEFAULT_MODEL
from app.engine.jobs.queue import JobQueue, params_of
from app.engine.jobs.states import JobStatus
from app.engine.logs import configure_logging
from app.engine.settings import Settings, database_location
from app.engine.store.opening import OpenFor, open_queue
from app.engine.workers.database_watch import DatabaseFileReplaced, DatabaseFileWatch
from app.engine.workers.job_run import Heartbeat, JobRun, LostJob, RunContext
from app.engine.workers.job_run import RunnerLike as RunnerLike  # its home was here; keep the name
from app.engine.workers.liveness import LivenessLock, WorkerIdentity, new_token, this_host
from app.engine.workers.messages import MessageKind, WorkerMessage
from app.engine.workers.presence import BEAT_MAX_S, Presence
from app.engine.workers.stall import ExpectedStepTimes
from app.engine.workers.wakeup import Sleeper, Wakeup, wakeup_for
from app.engine.workers.worker_states import StartedBy, WorkerRequest, WorkerState
from app.errors import DatabaseUnreachable, DiskFull, EaselError
from app.models.tables import Job

log = logging.getLogger(__name__)

LIVENESS_FOLDER = "workers"
STOP_CHECK_S = 0.05  # an idle worker notices a stop request this quickly
PARENT_CHECK_S = 0.2  # how often the step loop looks whether the app that started us is gone
RECONNECT_FIRST_S, RECONNECT_MAX_S = 0.5, 30.0  # backoff while the database server is away
HEARTBEATS_PER_TIMEOUT = 4  # a few heartbeats may be late before the watchdog gives up
SHUTDOWN_REASON = "the worker is stopping"  # SIGTERM, Ctrl+C
EXIT_LEFT_ON_REQUEST = 3  # exit code after a drain or stop on its row, or its file replaced
EXIT_STUCK = 4  # ... after its job's step got stuck: its supervisor starts a fresh one


RunnerFactory = Callable[[], RunnerLike]


def default_runner() -> RunnerLike:
    """The real runner, finding models where the app's model picker looks for them: every
    resolver it uses (models, LoRAs, upscalers, ControlNets, IP-Adapters, Redux) searches the
    settings' folders, as the checks at submit do, never the data folder's defaults."""
    from functools import partial

    from app.engine.generation.device import pick_device
    from app.engine.generation.files.sources import resolve_model
    from app.engine.generation.guidance.controlnets import controlnet_folders, find_controlnet
    from app.engine.generation.guidance.ip_adapters import find_ip_adapter, ip_adapter_folders
    from app.engine.generation.guidance.redux_models import find_redux_model, redux_folders
    from app.engine.generation.load.pipelines import PipelineCache
    from app.engine.generation.post.upscalers import upscaler_folders
    from app.engine.generation.prompts.loras import lora_folders
    from app.engine.generation.runner import Runner  # torch: only ever inside a worker
    from app.engine.settings import load_settings

    settings = load_settings()
    search = settings.model_search_path()
    return Runner(
        device=pick_device(low_vram=settings.low_vram),
        resolve=partial(resolve_model, search=search),
        cache=PipelineCache(
            lora_folders=lora_folders(search),
            budget_bytes=int(settings.memory_budget_gb * 2**30),  # 0: from RAM and VRAM
        ),
        upscalers=upscaler_folders(search),
        resolve_control=partial(find_controlnet, folders=controlnet_folders(search)),
        resolve_reference=partial(find_ip_adapter, folders=ip_adapter_folders(search)),
        resolve_redux=partial(find_redux_model, folders=redux_folders(search)),
    )


class EventLike(Protocol):
    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class WorkerConfig:
    """Everything a worker process needs; plain values, so it pickles into a spawned child."""

    db_path: str  # a SQLite file or a PostgreSQL URL
    outputs_dir: str
    checkpoints_dir: str
    liveness_dir: str
    heartbeat_interval_s: float = 3.0
    # The heartbeat comes from a thread, so it would outlive a stuck main thread: a run is
    # stuck once no step finished for a few times a step's time (see `stall`), or for this
    # long outside the step loop (loading, decoding) and while a step's time is unknown.
    stall_limit_s: float = 300.0
    progress_interval_s: float = 0.25  # progress row updates at most this often
    checkpoint_interval_s: float = 10.0  # rolling checkpoints this often (0: none) ...
    checkpoint_every_steps: int = 0  # ... and/or every this many steps (0: none)
    idle_poll_s: float = 0.25
    warm_model: str | None = DEFAULT_MODEL  # loaded before the first claim
    runner_factory: RunnerFactory = default_runner  # a module-level callable (pickled by name)
    until_idle: bool = False  # exit when no job is pending at all
    only_job: int | None = None  # claim only this job
    log_level: int = logging.INFO
    # This machine's name in worker ids (default: the host name). Recovery checks workers of
    # its own host by their lock file and all others by heartbeat age, so machines that share
    # a host name (containers) need distinct names.
    name: str | None = None
    # torch's CPU threads; 0: its default (every core). Workers must share the cores:
    # N workers x all-cores threads oversubscribe, measured 30x slower on 2 busy cores.
    torch_threads: int = 0
    # How many workers share this one's device: its supervisor's worker count (they all run
    # on one device), so each plans for its share of the GPU's memory (`memory`).
    device_workers: int = 1
    # The worker row's beat (see `presence`), also while idle; it reads drain/stop requests.
    presence_interval_s: float = BEAT_MAX_S
    # Model-aware claims: how far affinity to the models this worker holds may delay a job
    # (see `app.engine.jobs.affinity`; the settings' affinity_max_wait_s, _max_skips).
    affinity_max_wait_s: float = 60.0
    affinity_max_skips: int = 8
    # Whose supervisor starts this worker: what happens to the job in hand once that
    # program is gone (the window's is paused; `worker`'s and `serve`'s go back to the queue).
    started_by: StartedBy = StartedBy.WINDOW

    @property
    def affinity(self) -> AffinityBound:
        return AffinityBound(
            max_wait_s=self.affinity_max_wait_s,
            max_skips=self.affinity_max_skips,
            # A live worker's row is never older than two of its beats.
            peers_seen_within_s=max(
                self.heartbeat_interval_s * HEARTBEATS_PER_TIMEOUT, 2 * self.presence_interval_s
            ),
        )

    @classmethod
    def from_settings(
        cls, settings: Settings, db_path: Path | str | None = None, **overrides: Any
    ) -> WorkerConfig:
        heartbeat_interval_s = settings.heartbeat_timeout_s / HEARTBEATS_PER_TIMEOUT
        config = cls(
            db_path=str(db_path or database_location()),
            outputs_dir=str(settings.outputs_path()),
            checkpoints_dir=str(paths.checkpoints_dir()),
            liveness_dir=str(default_liveness_dir()),
            heartbeat_interval_s=heartbeat_interval_s,
            checkpoint_interval_s=settings.checkpoint_interval_s,
            presence_interval_s=min(BEAT_MAX_S, heartbeat_interval_s),
            stall_limit_s=settings.stall_limit_s,
            affinity_max_wait_s=settings.affinity_max_wait_s,
            affinity_max_skips=settings.affinity_max_skips,
        )
        return replace(config, **overrides)


def database_file(queue: JobQueue) -> str:
    """The queue's database (SQLite file or PostgreSQL URL), for workers to open their own
    connection to."""
    return queue.db.location


def default_liveness_dir() -> Path:
    return paths.data_dir() / LIVENESS_FOLDER


class Outbox:
    """Sends `WorkerMessage`s to the app from a thread of its own, never blocking the worker.

    A slow or absent reader must not stall generation: progress messages are dropped when
    the buffer is full; the others wait a little, then are dropped too (the database has
    the truth; messages only make the app hear it sooner).
    """

    def __init__(self, sink: Callable[[WorkerMessage], object] | None, capacity: int = 256) -> None:
        self._sink = sink
        self._pending: stdlib_queue.Queue[WorkerMessage | None] = stdlib_queue.Queue(capacity)
        self._broken = False
        self._thread = threading.Thread(target=self._pump, name="outbox", daemon=True)
        if sink is not None:
            self._thread.start()

    @property
    def connected(self) -> bool:
        """Whether messages reach anyone (a headless worker has no app to tell)."""
        return self._sink is not None and not self._broken

    def send(self, message: WorkerMessage, *, droppable: bool = False) -> None:
        if not self.connected:
            return
        try:
            self._pending.put(message, block=not droppable, timeout=1.0)
        except stdlib_queue.Full:
            log.debug("outbox full; dropped %s", message.kind)

    def close(self, timeout: float = 2.0) -> None:
        if self._sink is None or not self._thread.is_alive():
            return
        try:
            self._pending.put(None, timeout=timeout)
        except stdlib_queue.Full:
            return
        self._thread.join(timeout)

    def _pump(self) -> None:
        assert self._sink is not None
        while (message := self._pending.get()) is not None:
            try:
                self._sink(message)
            except (OSError, EOFError, ValueError):
                self._broken = True  # the app is gone; keep working, stop talking
                return


class Worker:
    def __init__(
        self,
        config: WorkerConfig,
        queue: JobQueue,
        runner: RunnerLike,
        worker_id: str,
        outbox: Outbox,
        *,
        stop_event: EventLike | None = None,
        parent_alive: Callable[[], bool] = lambda: True,
        parent_pid: int | None = None,
        wakeup: Wakeup | None = None,
        db_file: DatabaseFileWatch | None = None,
    ) -> None:
        self.config = config
        self.queue = queue
        self.runner = runner
        self.worker_id = worker_id
        self.outbox = outbox
        self._stop_event = stop_event
        self._parent_alive = parent_alive
        self._parent_pid = parent_pid  # named in the timeline once it is gone
        self.wakeup: Wakeup = wakeup or Sleeper()
        self._reconnect_delay_s = RECONNECT_FIRST_S
        self._pause_and_exit = False  # a plain bool: set from a signal handler
        self._orphaned = False  # our parent process is gone (see `orphaned`)
        self._parent_checked_at = float("-inf")
        # Asked on our row (drain, stop), seen by the presence beat's thread.
        self._draining = False
        self._stop_reason: str | None = None
        identity = WorkerIdentity.parse(worker_id)
        machine = config.name or (identity.host if identity is not None else worker_id)
        self.presence = Presence(queue.db, worker_id, machine, clock=queue.clock)
        self._ready = False
        self._job_id: int | None = None
        self._jobs_done = 0
        self._step_times = ExpectedStepTimes(queue)
        # A SQLite file deleted or replaced under us (see `database_watch`): once seen, we stop and
        # write nothing more.
        self._db_file = db_file
        self.replaced: DatabaseFileReplaced | None = None
        self._replaced_lock = threading.Lock()

    def request_stop(self) -> None:
        """Pause the running job at its next step checkpoint, then exit (SIGTERM, Ctrl+C)."""
        self._pause_and_exit = True

    @property
    def pause_requested(self) -> str | None:
        """Why the job in hand is to be paused now, or None."""
        if self._pause_and_exit:
            return SHUTDOWN_REASON
        if self._stop_reason is not None:
            return self._stop_reason
        return self.config.started_by.gone_reason(self._parent_pid) if self.orphaned else None

    def hand_back_cause(self, pause_reason: str) -> str | None:
        """After its own pause for `pause_reason`, why the job goes back to the queue ("the
        worker supervisor (pid 4242) was gone"); None: it stays PAUSED. Only a headless
        worker's supervisor being gone hands a job back (`StartedBy.hands_back`)."""
        started_by = self.config.started_by
        if not started_by.hands_back or pause_reason != started_by.gone_reason(self._parent_pid):
            return None
        return started_by.parent_gone(self._parent_pid)

    @property
    def asked_to_leave(self) -> bool:
        """Drain or stop was requested on our row: exit, and let nobody take our place."""
        return self._draining or self._stop_reason is not None

    @property
    def must_not_be_replaced(self) -> bool:
        """Asked to leave, or our database file was replaced: a worker started in our place
        by the same app would be no better off."""
        return self.asked_to_leave or self.replaced is not None

    @property
    def gives_up_waiting(self) -> bool:
        """Stop waiting for disk space (SIGTERM, Ctrl+C, a stop request, a replaced file):
        the job in hand is left as it is, and settled once this worker is found gone."""
        return self._pause_and_exit or self._stop_reason is not None or self.replaced is not None

    @property
    def stopping(self) -> bool:
        """Claim no more jobs. The app's stop event alone lets the job in hand finish: the
        app pauses jobs itself, through the table, when it wants them paused."""
        stop_event = self._stop_event is not None and self._stop_event.is_set()
        return self._pause_and_exit or stop_event or self.must_not_be_replaced

    @property
    def orphaned(self) -> bool:
        """The program that started us is gone (killed, say): stop the job in hand at its
        next step, with a checkpoint, claim no more and leave, rather than run on unseen
        beside the next window's workers. The window's job then waits PAUSED; a headless
        supervisor's goes back to the queue (`hand_back_cause`). Asked at every step: looked
        up at most every `PARENT_CHECK_S` (a wait on the parent's pipe), and once gone,
        gone for good."""
        if self._orphaned:
            return True
        now = time.monotonic()
        if now - self._parent_checked_at >= PARENT_CHECK_S:
            self._parent_checked_at = now
            if not self._parent_alive():
                log.warning("%s: the process that started this worker is gone", self.worker_id)
                self._orphaned = True
        return self._orphaned

    def send(self, kind: MessageKind, job_id: int | None = None, **fields: Any) -> None:
        message = WorkerMessage(kind, self.worker_id, job_id, **fields)
        # A later PROGRESS supersedes an earlier one: those may be dropped, the others not.
        self.outbox.send(message, droppable=kind is MessageKind.PROGRESS)

    def run(self) -> None:
        self.presence.register(device=_device_label(self.runner))
        with Heartbeat(self._beat, self.config.presence_interval_s):
            self._warm_up()
            self._ready = True
            self._update_row(self.state)
            self.send(MessageKind.READY, device=_device_label(self.runner))
            self._work()
        self._update_row(WorkerState.EXITED, current_job=None)
        self.send(MessageKind.EXITING)

    def _update_row(self, state: WorkerState, **changes: Any) -> None:
        if self.replaced is None:  # the row is in a file nobody looks at any more
            self.presence.update(state, **changes)

    def database_replaced(self) -> bool:
        """Whether our SQLite file was deleted or replaced (checked now: one `stat`). The
        first time, say so in one line and refuse every later write to the old file."""
        if self.replaced is not None:
            return True
        problem = self._db_file.problem() if self._db_file is not None else None
        if problem is None:
            return False
        with self._replaced_lock:  # both threads look: the line is said once
            if self.replaced is None:
                log.warning("%s", problem)
                self.queue.db.refusal = problem  # a write under way is refused, not made
                self.replaced = problem
        return True

    @property
    def state(self) -> WorkerState:
        """What the worker row says, from this process's own flags."""
        if self._pause_and_exit or self._stop_reason is not None:
            return WorkerState.STOPPING
        if self._draining:
            return WorkerState.DRAINING
        if not self._ready:
            return WorkerState.STARTING
        return WorkerState.BUSY if self._job_id is not None else WorkerState.IDLE

    def _beat(self) -> None:
        """On the presence thread: we are alive (and in this state); take up a request. Also
        where a replaced database file is noticed, within one beat while a job runs."""
        if self.database_replaced():
            return
        asked = self.presence.beat(self.state)
        if asked is None:
            return
        request, by = asked
        if request is WorkerRequest.STOP and self._stop_reason is None:
            self._stop_reason = f"stop requested from {by}"
        elif request is WorkerRequest.DRAIN and not self._draining:
            self._draining = True
        else:
            return
        log.info("%s requested from %s: %s", request.value, by, self.worker_id)
        self._update_row(self.state)

    def held_models(self) -> list[str]:
        """The models the runner holds in memory, most recently used first (a runner without
        a cache of models holds none that it can name)."""
        held = getattr(self.runner, "held_models", None)
        return list(held()) if callable(held) else []

    def _models_row(self) -> dict[str, Any]:
        return {"models": json.dumps(self.held_models())}

    def _read_ahead(self, job: Job) -> None:
        """While `job` runs, have the runner read in the model the queue needs next, if it
        holds it not: its load then finds the file in memory (`Runner.read_ahead`)."""
        read_ahead = getattr(self.runner, "read_ahead", None)
        if not callable(read_ahead):
            return
        try:
            upcoming = self.queue.next_models(limit=4)
        except EaselError as error:
            log.debug("no read-ahead: %s", error)
            return
        held = {job.model, *self.held_models()}
        for model in upcoming:
            if model not in held:
                read_ahead(model)
                return

    def _run_job(self, job: Job) -> None:
        self._job_id = job.id
        self._update_row(self.state, current_job=job.id, model=job.model)
        self._read_ahead(job)
        run = JobRun(self._run_context(job), job)
        try:
            while not self._ran_through(run):
                run = JobRun(self._run_context(job), job)  # the same claim: resumes its checkpoint
        except DatabaseFileReplaced:
            pass  # said when it was noticed; the job stays as it was in the old file
        except DiskFull as error:
            if not self.gives_up_waiting:
                raise
            log.warning(
                "job %s is left as it was: the worker stopped while waiting for disk space "
                "(%s); it is retried once this worker is found gone", job.id, error,
            )  # fmt: skip
        finally:
            self._job_id = None
            self.wakeup.quicken()  # a client's next job may follow at once
            if run.completed:
                self._jobs_done += 1
            self._update_row(
                self.state, current_job=None, jobs_done=self._jobs_done, **self._models_row()
            )

    def _step_request(self) -> str | None:
        """Asked at each step of the job in hand while it runs: pause it, for this reason
        (None: carry on). Once our database file was replaced, the run is dropped instead,
        the way a lost job's is: the runner unwinds without writing anything."""
        if self.replaced is not None:
            log.info("job %s: dropped its run; its database file was deleted or replaced",
                     self._job_id)  # fmt: skip
            raise LostJob(self._job_id)
        return self.pause_requested

    def _ran_through(self, run: JobRun) -> bool:
        """Run it; False when the store went away before the run could finish (while it
        started, say) and, once it is back, the job is still ours: run it again. A job
        kept through an outage is kept, not left for a watchdog to time out."""
        try:
            run.run()
            return True
        except DatabaseUnreachable:
            pass
        while True:
            # No growing backoff: nothing beats for the job until it runs again, and once
            # the store is back a watchdog waits only one heartbeat timeout.
            self._sleep_unless_stopping(self.config.heartbeat_interval_s)
            if self.stopping:
                return True  # left held: recovery settles it like any lost job
            try:
                return self.queue.status_if_held(run.job_id, self.worker_id) is None
            except DatabaseUnreachable:
                continue

    def _work(self) -> None:
        while not (self.stopping or self.orphaned or self.database_replaced()):
            try:
                job = self.queue.claim(
                    self.worker_id, job_id=self.config.only_job, models=self.held_models()
                )
                if job is not None:
                    self._run_job(job)
            except DatabaseFileReplaced:
                break  # noticed between the check and the claim: said once, already
            except DiskFull as error:
                if not self.gives_up_waiting:
                    raise
                log.warning("the worker stopped while waiting for disk space: %s", error)
                break
            except DatabaseUnreachable as error:
                # The server is away: keep our place, retry with backoff. A run broken off by
                # it was taken up again, or given up if we were stopping (`_ran_through`).
                self._wait_for_database(error)
                continue
            self._reconnect_delay_s = RECONNECT_FIRST_S
            if job is not None:
                continue
            if self.config.until_idle and not self._anything_pending():
                break
            self._idle()

    def _wait_for_database(self, error: DatabaseUnreachable) -> None:
        delay = self._reconnect_delay_s
        # The outage itself is said once, by the database (`Outage`), not at every try.
        log.debug("%s Next try in %.1fs.", error, delay)
        self._sleep_unless_stopping(delay)
        self._reconnect_delay_s = min(delay * 2, RECONNECT_MAX_S)

    def _sleep_unless_stopping(self, delay_s: float) -> None:
        deadline = time.monotonic() + delay_s
        while time.monotonic() < deadline and not self.stopping:
            time.sleep(STOP_CHECK_S)

    def _run_context(self, job: Job) -> RunContext:
        config = self.config
        steps = params_of(job).denoising_steps
        return RunContext(
            queue=self.queue, worker_id=self.worker_id, runner=self.runner,
            outputs_dir=Path(config.outputs_dir), checkpoints_dir=Path(config.checkpoints_dir),
            send=self.send, pause_requested=self._step_request, hand_back=self.hand_back_cause,
            heartbeat_interval_s=config.heartbeat_interval_s,
            stall_limit_s=config.stall_limit_s, progress_interval_s=config.progress_interval_s,
            device=_device_kind(self.runner),
            expected_step_s=self._step_times.for_job(job, self.worker_id, steps),
            on_stuck=self._end_stuck_process,
            checkpoint_interval_s=config.checkpoint_interval_s,
            checkpoint_every_steps=config.checkpoint_every_steps,
            watched=self.outbox.connected, watch=self.wakeup.watching,
        )  # fmt: skip

    def _end_stuck_process(self) -> None:
        """Called from the heartbeat thread once the stuck job was settled: the main thread
        is stuck in the runner and cannot be stopped from here, so the process ends (its
        supervisor, the window's or `python -m app worker`'s, starts a fresh worker)."""
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(EXIT_STUCK)

    def _warm_up(self) -> None:
        if not self.config.warm_model:
            return
        try:
            self.runner.load(self.config.warm_model)
            self.presence.update(self.state, model=self.config.warm_model, **self._models_row())
        except Exception as error:
            # Not fatal: the model may be installed later; each job then fails with the reason.
            log.warning("could not load %s while warming up: %s", self.config.warm_model, error)

    def _anything_pending(self) -> bool:
        return self.queue.count_by_status().get(JobStatus.PENDING, 0) > 0

    def _idle(self) -> None:
        """Until the poll interval ends, the database wakes us (see `wakeup`) or we stop."""
        deadline = time.monotonic() + self.wakeup.poll_s(self.config.idle_poll_s)
        while (left := deadline - time.monotonic()) > 0 and not self.stopping:
            if self.wakeup.wait(min(STOP_CHECK_S, left)):
                return


def _device_kind(runner: RunnerLike) -> str | None:
    """ "cuda:1", "mps", "cpu": where a step runs, for the stall rule's floor; fakes: None."""
    device = getattr(runner, "device", None)
    return None if device is None else str(device.device)


def _device_label(runner: RunnerLike) -> str | None:
    """ "cuda/float16" and the like, for the app's About box; fakes have no device."""
    device = getattr(runner, "device", None)
    if device is None:
        return None
    return f"{device.device}/{device.dtype_name}"


def run_worker(
    config: WorkerConfig,
    *,
    token: str | None = None,
    sink: Callable[[WorkerMessage], object] | None = None,
    stop_event: EventLike | None = None,
    parent_alive: Callable[[], bool] = lambda: True,
    parent_pid: int | None = None,
    stop_on_sigint: bool = False,
) -> bool:
    """Be a worker in this process until stopped (or idle, with `until_idle`). True: nobody
    should start a worker in its place (drain or stop on its row, its database file replaced)."""
    token = token or new_token()
    worker_id = str(WorkerIdentity(config.name or this_host(), os.getpid(), token))
    signals = [signal.SIGTERM, signal.SIGINT] if stop_on_sigint else [signal.SIGTERM]
    with LivenessLock(Path(config.liveness_dir), token):
        queue = open_queue(config.db_path, OpenFor.WORKING)
        queue.affinity = config.affinity
        db_file = DatabaseFileWatch(queue.db.path) if queue.db.path is not None else None
        outbox = Outbox(sink)
        _limit_torch_threads(config.torch_threads)
        worker = Worker(
            config, queue, config.runner_factory(), worker_id, outbox,
            stop_event=stop_event, parent_alive=parent_alive, parent_pid=parent_pid,
            wakeup=wakeup_for(queue.db), db_file=db_file,
        )  # fmt: skip
        # SIGTERM must reach a worker waiting for disk space: it stops waiting and leaves.
        queue.db.stop_waiting = lambda: worker.gives_up_waiting
        previous = {
            signum: signal.signal(signum, _handler(worker.request_stop)) for signum in signals
        }
        try:
            worker.run()
            return worker.must_not_be_replaced
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            outbox.close()
            worker.wakeup.close()
            queue.db.dispose()


def worker_process_main(
    config: WorkerConfig, token: str, conn: Connection, stop_event: EventLike
) -> None:
    """Entry point of a spawned worker process (see `supervisor.Supervisor`)."""
    import multiprocessing

    # Ctrl+C in a terminal reaches the whole process group; the app decides what it means.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # One log file per worker slot (worker-0.log, ...): rotation never races between processes.
    role = multiprocessing.current_process().name.removeprefix("easel-")
    configure_logging(role, level=config.log_level)
    parent = multiprocessing.parent_process()
    _share_device(config.device_workers)
    left_on_request = run_worker(
        config, token=token, sink=conn.send, stop_event=stop_event,
        parent_alive=parent.is_alive if parent is not None else lambda: True,
        parent_pid=parent.pid if parent is not None else None,
    )  # fmt: skip
    if left_on_request:
        sys.exit(EXIT_LEFT_ON_REQUEST)  # the supervisor starts none in its place


def threads_per_worker(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def _share_device(workers: int) -> None:
    """Tell the memory budget, in this worker process only, how many workers share its
    device (the environment, as $EASEL_DEVICE tells it which device)."""
    from app.engine.generation.memory import DEVICE_WORKERS_ENV  # no torch at import

    os.environ[DEVICE_WORKERS_ENV] = str(max(1, workers))


def _limit_torch_threads(threads: int) -> None:
    if threads > 0:
        import torch  # inside the worker process only

        torch.set_num_threads(threads)


def _handler(action: Callable[[], None]) -> Callable[[int, FrameType | None], None]:
    def handler(_signum: int, _frame: FrameType | None) -> None:
        action()

    return handler
