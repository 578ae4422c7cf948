"""What a worker can be and be asked, as the Workers panel and `workers` show it.

No database here: the window imports these names before the database stack is loaded
(see app/ui/main.py). The rows are read and written in `fleet_status` and `presence`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class WorkerState(StrEnum):
    STARTING = "starting"  # loading its model
    IDLE = "idle"
    BUSY = "busy"
    DRAINING = "draining"  # asked to drain: finishes the job in hand, then exits
    STOPPING = "stopping"  # asked to stop: pauses the job in hand, then exits
    EXITED = "exited"
    LOST = "lost"  # never stored: not heard from for the liveness timeout

    @property
    def is_gone(self) -> bool:
        return self in (WorkerState.EXITED, WorkerState.LOST)


class WorkerRequest(StrEnum):
    DRAIN = "drain"
    STOP = "stop"


# Who asked, as the paused job's timeline names it ("stop requested from the Workers panel").
FROM_PANEL = "the Workers panel"
FROM_COMMAND_LINE = "the command line"


@dataclass(frozen=True)
class WorkerSummary:
    worker_id: str
    machine: str  # --name or the host name
    state: WorkerState
    current_job: int | None  # the job it holds now (PROCESSING, CANCELLING or PAUSING)
    last_heard_s: float | None  # seconds since its last sign of life
    jobs_done: int  # images it finished
    device: str | None = None
    model: str | None = None
    request: WorkerRequest | None = None  # asked but not yet taken up
    models: tuple[str, ...] = ()  # the models it holds in memory, most recently used first


class StartedBy(StrEnum):
    """The program whose supervisor started a worker: what the worker does with the job in
    hand once that program is gone (killed, say), and how the timeline names it."""

    WINDOW = "window"
    GENERATE = "generate"  # `python -m app generate`
    WORKER_COMMAND = "worker"  # `python -m app worker`
    SERVER = "serve"  # `python -m app serve`

    @property
    def words(self) -> str:
        """What was gone, as the job's timeline says it."""
        return _STARTER_WORDS[self]

    @property
    def hands_back(self) -> bool:
        """A render node's work must go on without its supervisor: the job goes back to the
        queue, with its checkpoint, for any worker. A window or a `generate` was a person's:
        their job waits PAUSED until they look (pause-when-gone is theirs, not the farm's)."""
        return self in (StartedBy.WORKER_COMMAND, StartedBy.SERVER)

    def gone_reason(self, pid: int | None) -> str:
        """Why the worker stops its job at the next step: the PAUSE row's message."""
        if self is StartedBy.WINDOW:
            return WINDOW_GONE_REASON  # the relaunch finds its jobs by it
        if self.hands_back:
            return f"{HANDING_BACK}: {self.parent_gone(pid)}"
        return f"paused: {self.words} that started its worker was gone"

    def parent_gone(self, pid: int | None) -> str:
        """ "the worker supervisor (pid 4242) was gone" """
        return f"{self.words} (pid {pid}) was gone" if pid else f"{self.words} was gone"


_STARTER_WORDS = {
    StartedBy.WINDOW: "the window",
    StartedBy.GENERATE: "the generate command",
    StartedBy.WORKER_COMMAND: "the worker supervisor",
    StartedBy.SERVER: "the server",
}

# Why a worker paused its job by itself: the window that started it was gone, killed say.
# The job keeps its progress in a checkpoint and waits PAUSED, so nothing runs unseen beside
# the next window's workers; the next launch tells the user
# (`app.engine.workers.recovery.paused_when_window_gone`).
WINDOW_GONE_REASON = "paused: the window that started its worker was gone"
# A headless worker whose supervisor (`worker`, `serve`) is gone pauses its job at the next
# step with a checkpoint (PAUSE: "handing its job back to the queue: the worker supervisor
# (pid 4242) was gone"), then queues it again itself (RESUME: "requeued with saved step 7:
# the worker supervisor (pid 4242) was gone"): any worker of the farm continues it.
HANDING_BACK = "handing its job back to the queue"
REQUEUED = "requeued with saved step"
