"""What one server process keeps beside the database: its queue, limits, the latest preview
of each job its own workers run, and the model A1111 clients picked."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.generation.sources import ModelInfo, inside_model_folders, list_models
from app.engine.history.eta import Estimator, learned
from app.engine.jobs.params import DEFAULT_MODEL
from app.engine.jobs.queue import JobQueue
from app.engine.settings import Settings
from app.engine.workers.messages import MessageKind, WorkerMessage
from app.server.records import Records
from app.server.redact import redact, server_folders

MAX_BODY_BYTES = 16 * 2**20  # a base64 init image of the largest accepted size fits
MAX_IN_FLIGHT = 64  # requests served at once (event streams apart); more get 503
MAX_STREAMS = 64  # event streams open at once
ESTIMATE_FOR_S = 30.0  # learned run times are read again after this long
MODELS_FOR_S = 10.0
KEEP_STEPS = 1000  # jobs whose last reported step is kept


class Settled:
    """Wakes the requests that wait for jobs (A1111's txt2img) the moment one of this
    server's own workers settles a job, so that they need not read the store many times a
    second to answer soon. A waiter takes `count` before it reads the store and waits for
    a settle after that: one that lands between its read and its wait is not missed."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()
        self._waiting: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def notify(self) -> None:
        """From the supervisor's thread: a job was settled (its transition committed)."""
        with self._lock:
            self.count += 1
            waiting = list(self._waiting)
        for loop, event in waiting:
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits there
                loop.call_soon_threadsafe(event.set)

    async def wait(self, after: int, timeout_s: float) -> None:
        """Until a job settles after `count` was `after`, or `timeout_s` passes."""
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            if self.count != after:
                return
            self._waiting.add(entry)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout_s)
        finally:
            with self._lock:
                self._waiting.discard(entry)


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = MAX_BODY_BYTES
    max_in_flight: int = MAX_IN_FLIGHT
    max_streams: int = MAX_STREAMS


@dataclass
class ServerState:
    queue: JobQueue
    settings: Settings
    token: str | None = None
    limits: Limits = field(default_factory=Limits)
    cors_origins: tuple[str, ...] = ()
    log_file: Path | str = "the log"
    records: Records = field(init=False)
    sd_model: str = DEFAULT_MODEL  # A1111's sd_model_checkpoint: the model its clients get
    # Whether this server supervises workers of its own (not `--no-workers`), whose settles
    # `settled` hears of at once; jobs a peer runs are only seen in the store.
    own_workers: bool = False
    settled: Settled = field(default_factory=Settled)
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
        self.records = Records(self.queue.db)

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
