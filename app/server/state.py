"""What one server process keeps beside the database: its queue, limits, the latest preview
of each job its own workers run, and the model A1111 clients picked."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from app.engine.generation.files.sources import ModelInfo, inside_model_folders, list_models
from app.engine.history.eta import Estimator, learned
from app.engine.jobs.api_jobs import ApiJobs
from app.engine.jobs.params import DEFAULT_MODEL
from app.engine.jobs.queue import JobQueue
from app.engine.settings import Settings
from app.engine.workers.messages import MessageKind, WorkerMessage
from app.server.redact import redact, server_folders
from app.server.security import ServedNames
from app.server.waits import JobWaits, Settled

MAX_BODY_BYTES = 16 * 2**20  # a base64 init image of the largest accepted size fits
MAX_IN_FLIGHT = 64  # requests served at once (event streams apart); more get 503
MAX_STREAMS = 64  # event streams open at once
# A1111 requests waiting for their jobs: each costs a coroutine and a small read a poll, not
# a slot of the requests in flight (64 of them made /progress and /interrupt answer 503).
MAX_WAITING = 512
SLOT_KEY = "easel.slot"  # a request's in-flight `Slot`, in its ASGI scope (the Guard's)
ESTIMATE_FOR_S = 30.0  # learned run times are read again after this long
MODELS_FOR_S = 10.0
KEEP_STEPS = 1000  # jobs whose last reported step is kept


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = MAX_BODY_BYTES
    max_in_flight: int = MAX_IN_FLIGHT
    max_streams: int = MAX_STREAMS
    max_waiting: int = MAX_WAITING


class SlotKind(StrEnum):
    IN_FLIGHT = "requests are in flight"
    STREAM = "event streams are open"
    WAITING = "requests are waiting for their jobs"


class Slots:
    """How many requests of each kind the server is serving, each kind against its own
    limit. Touched only on the event loop's thread (the Guard and async handlers)."""

    def __init__(self, limits: Limits) -> None:
        self.limit = {
            SlotKind.IN_FLIGHT: limits.max_in_flight,
            SlotKind.STREAM: limits.max_streams,
            SlotKind.WAITING: limits.max_waiting,
        }
        self.used = dict.fromkeys(SlotKind, 0)

    def take(self, kind: SlotKind) -> Slot | None:
        """A slot of `kind`, or None when all are taken."""
        if self.used[kind] >= self.limit[kind]:
            return None
        self.used[kind] += 1
        return Slot(self, kind)

    def busy(self, kind: SlotKind) -> str:
        """The sentence a 503 says when `take` gave None."""
        return f"Too many {kind.value} ({self.limit[kind]}); try again shortly."


class Slot:
    """One request's place: given back when it ends, or sooner (a waiting A1111 request
    gives back its in-flight slot once its jobs are stored); giving it back twice is one."""

    def __init__(self, slots: Slots, kind: SlotKind) -> None:
        self.slots = slots
        self.kind = kind
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.slots.used[self.kind] -= 1


@dataclass
class ServerState:
    queue: JobQueue
    settings: Settings
    token: str | None = None
    limits: Limits = field(default_factory=Limits)
    cors_origins: tuple[str, ...] = ()
    log_file: Path | str = "the log"
    served: ServedNames = field(default_factory=lambda: ServedNames.for_bind("127.0.0.1"))
    # A1111 clients that cannot send a token may use /sdapi without one (loopback only).
    a1111_without_token: bool = False
    records: ApiJobs = field(init=False)
    slots: Slots = field(init=False)
    sd_model: str = DEFAULT_MODEL  # A1111's sd_model_checkpoint: the model its clients get
    # Whether this server supervises workers of its own (not `--no-workers`), whose settles
    # `settled` hears of at once; jobs a peer runs are only seen in the store.
    own_workers: bool = False
    settled: Settled = field(default_factory=Settled)
    waits: JobWaits = field(init=False)
    # The jobs of each A1111 request this server is waiting for, by each of its job ids:
    # what /interrupt stops with the generation in progress (A1111: the rest of its batch).
    a1111_batches: dict[int, tuple[int, ...]] = field(default_factory=dict)
    _previews: dict[int, bytes] = field(default_factory=dict)
    _steps: dict[int, int] = field(default_factory=dict)  # the newest step each job reported
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _estimator: tuple[float, Estimator] | None = None
    _models: tuple[float, list[ModelInfo]] | None = None
    _folders: list[tuple[str, str]] | None = None

    def redact(self, text: str) -> str:
        """`text` as a remote client may read it: no server folder in it (redact.py)."""
        if self._folders is None:
            self._folders = server_folders(self.settings)
        return redact(text, self._folders)

    def __post_init__(self) -> None:
        self.records = ApiJobs(self.queue.db)
        self.slots = Slots(self.limits)
        self.waits = JobWaits(self.queue, self.settled)

    def on_worker_message(self, message: WorkerMessage) -> None:
        """From the supervisor of this server's workers: keep each job's newest preview."""
        if message.job_id is None:
            return
        with self._lock:
            if message.kind is MessageKind.PROGRESS:
                self._steps[message.job_id] = message.step
                if len(self._steps) > KEEP_STEPS:
                    del self._steps[next(iter(self._steps))]
                if message.preview_png:
                    self._previews[message.job_id] = message.preview_png
            elif message.kind is MessageKind.FINISHED:
                self._previews.pop(message.job_id, None)
        if message.kind is MessageKind.FINISHED:
            self.settled.notify()

    @contextlib.contextmanager
    def waiting_for(self, job_ids: tuple[int, ...]) -> Iterator[None]:
        """While an A1111 request waits for `job_ids`, one batch for /interrupt."""
        with self._lock:
            for job_id in job_ids:
                self.a1111_batches[job_id] = job_ids
        try:
            yield
        finally:
            with self._lock:
                for job_id in job_ids:
                    self.a1111_batches.pop(job_id, None)

    def batch_of(self, job_id: int) -> tuple[int, ...]:
        """The jobs of the waiting A1111 request `job_id` belongs to (just it when none)."""
        with self._lock:
            return self.a1111_batches.get(job_id, (job_id,))

    def live_step(self, job_id: int) -> int | None:
        """The newest step a worker of this server reported for the job (every step, sooner
        than the job row, which is written a few times a second); None if none did."""
        with self._lock:
            return self._steps.get(job_id)

    def preview(self, job_id: int) -> bytes | None:
        with self._lock:
            return self._previews.get(job_id)

    def estimator(self) -> Estimator:
        now = time.monotonic()
        with self._lock:
            cached = self._estimator
        if cached is not None and now - cached[0] < ESTIMATE_FOR_S:
            return cached[1]
        estimator = learned(self.queue)
        with self._lock:
            self._estimator = (now, estimator)
        return estimator

    def forget_models(self) -> None:
        """The next `models()` reads the folders again (A1111's refresh-checkpoints)."""
        with self._lock:
            self._models = None

    def models(self) -> list[ModelInfo]:
        now = time.monotonic()
        with self._lock:
            cached = self._models
        if cached is not None and now - cached[0] < MODELS_FOR_S:
            return cached[1]
        search = self.settings.model_search_path()
        # Only what a request may name: a model a link takes outside the folders is left out.
        found = [info for info in list_models(search) if inside_model_folders(info, search)]
        with self._lock:
            self._models = (now, found)
        return found
