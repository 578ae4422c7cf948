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


# Why a worker paused its job by itself: the process that started it (the window, or the
# `worker` command's supervisor) was gone, killed say. The job keeps its progress in a
# checkpoint and waits PAUSED, so nothing runs unseen beside the next window's workers;
# the next launch tells the user (`app.engine.workers.recovery.paused_when_window_gone`).
WINDOW_GONE_REASON = "paused: the window that started its worker was gone"
