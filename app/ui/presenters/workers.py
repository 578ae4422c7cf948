"""The Workers panel's rows in words (Qt-free): one line per worker process of any machine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.engine.workers.worker_states import WorkerRequest, WorkerState, WorkerSummary
from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate

STATES = {
    WorkerState.STARTING: QT_TRANSLATE_NOOP("Workers", "Starting"),
    WorkerState.IDLE: QT_TRANSLATE_NOOP("Workers", "Idle"),
    WorkerState.BUSY: QT_TRANSLATE_NOOP("Workers", "Busy"),
    WorkerState.DRAINING: QT_TRANSLATE_NOOP("Workers", "Draining: exits after this job"),
    WorkerState.STOPPING: QT_TRANSLATE_NOOP("Workers", "Stopping: pauses its job, then exits"),
    WorkerState.EXITED: QT_TRANSLATE_NOOP("Workers", "Exited"),
    WorkerState.LOST: QT_TRANSLATE_NOOP("Workers", "Lost: not heard from"),
}
ASKED = {
    WorkerRequest.DRAIN: QT_TRANSLATE_NOOP("Workers", "drain asked"),
    WorkerRequest.STOP: QT_TRANSLATE_NOOP("Workers", "stop asked"),
}
NONE = "—"


@dataclass(frozen=True)
class WorkerLine:
    """One row of the panel, every cell as shown."""

    worker_id: str
    machine: str
    device: str
    model: str
    job: str
    heard: str
    done: str
    state: str
    can_drain: bool
    can_stop: bool


def worker_lines(workers: Sequence[WorkerSummary]) -> list[WorkerLine]:
    return [_line(worker) for worker in workers]


def _line(worker: WorkerSummary) -> WorkerLine:
    state = translate("Workers", STATES[worker.state])
    if worker.request is not None and worker.state not in (
        WorkerState.DRAINING, WorkerState.STOPPING
    ):  # fmt: skip
        asked = translate("Workers", ASKED[worker.request])
        state = f"{state} ({asked})"
    live = not worker.state.is_gone
    return WorkerLine(
        worker_id=worker.worker_id,
        machine=worker.machine,
        device=worker.device or NONE,
        model=worker.model or NONE,
        job=f"#{worker.current_job}" if worker.current_job is not None else NONE,
        heard=format_ago(worker.last_heard_s),
        done=str(worker.jobs_done),
        state=state,
        can_drain=live and worker.state not in (WorkerState.DRAINING, WorkerState.STOPPING),
        can_stop=live and worker.state is not WorkerState.STOPPING,
    )


def format_ago(seconds: float | None) -> str:
    """ "4 s ago", "3 min ago", "2 h ago", "5 days ago"; "—" for never."""
    if seconds is None:
        return NONE
    if seconds < 60:
        return translate("Workers", "{n} s ago").format(n=int(seconds))
    if seconds < 3600:
        return translate("Workers", "{n} min ago").format(n=int(seconds // 60))
    if seconds < 86400:
        return translate("Workers", "{n} h ago").format(n=int(seconds // 3600))
    return translate("Workers", "{n} days ago").format(n=int(seconds // 86400))
