"""Which job actions apply to a selection: straight from the transition table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from app.engine.states import JobEvent, JobStatus
from app.ui.presenters.rows import JobRow


class Action(Enum):
    CANCEL = "Cancel"
    PAUSE = "Pause"
    RESUME = "Resume"
    RETRY = "Retry"
    RERUN = "Re-run"
    UP = "Move up"
    DOWN = "Move down"


EVENTS = {
    Action.CANCEL: JobEvent.CANCEL,
    Action.PAUSE: JobEvent.PAUSE,
    Action.RESUME: JobEvent.RESUME,
    Action.RETRY: JobEvent.RETRY,
}

# Button labels where the full name would crowd the bar (menus use the full name).
SHORT = {Action.UP: "↑", Action.DOWN: "↓"}

TIPS = {
    Action.CANCEL: "Stop the selected jobs for good",
    Action.PAUSE: "Hold the selected jobs; running ones keep their progress",
    Action.RESUME: "Queue paused jobs again, continuing where they stopped",
    Action.RETRY: "Try failed or timed-out jobs again",
    Action.RERUN: "Queue a new job with the same settings and seed",
    Action.UP: "Raise priority: runs sooner",
    Action.DOWN: "Lower priority: runs later",
}


@dataclass(frozen=True)
class Applicable:
    """The jobs of a selection that an action would move (empty: the action is disabled)."""

    job_ids: tuple[int, ...]

    def __bool__(self) -> bool:
        return bool(self.job_ids)


def applicable(action: Action, rows: Sequence[JobRow]) -> Applicable:
    return Applicable(tuple(row.id for row in rows if applies(action, row)))


def applies(action: Action, row: JobRow) -> bool:
    if action in EVENTS:
        return row.allows(EVENTS[action])
    if action is Action.RERUN:
        return row.can_rerun
    # Priority only matters while the job still waits for a worker.
    return row.status is JobStatus.PENDING
