"""Which job actions apply to a selection: straight from the transition table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from app.engine.states import JobEvent, JobStatus
from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate
from app.ui.presenters.rows import JobRow


class Action(Enum):
    CANCEL = QT_TRANSLATE_NOOP("Action", "Cancel")
    PAUSE = QT_TRANSLATE_NOOP("Action", "Pause")
    RESUME = QT_TRANSLATE_NOOP("Action", "Resume")
    RETRY = QT_TRANSLATE_NOOP("Action", "Retry")
    RERUN = QT_TRANSLATE_NOOP("Action", "Re-run")
    UP = QT_TRANSLATE_NOOP("Action", "Move up")
    DOWN = QT_TRANSLATE_NOOP("Action", "Move down")

    @property
    def label(self) -> str:
        """The action's name in the window's language (menus)."""
        return translate("Action", self.value)

    @property
    def tip(self) -> str:
        return translate("Action", TIPS[self])

    @property
    def button_text(self) -> str:
        return SHORT.get(self) or self.label


EVENTS = {
    Action.CANCEL: JobEvent.CANCEL,
    Action.PAUSE: JobEvent.PAUSE,
    Action.RESUME: JobEvent.RESUME,
    Action.RETRY: JobEvent.RETRY,
}

# Button labels where the full name would crowd the bar (menus use the full name).
SHORT = {Action.UP: "↑", Action.DOWN: "↓"}

TIPS = {
    Action.CANCEL: QT_TRANSLATE_NOOP("Action", "Stop the selected jobs for good"),
    Action.PAUSE: QT_TRANSLATE_NOOP(
        "Action", "Hold the selected jobs; running ones keep their progress"
    ),
    Action.RESUME: QT_TRANSLATE_NOOP(
        "Action", "Queue paused jobs again, continuing where they stopped"
    ),
    Action.RETRY: QT_TRANSLATE_NOOP("Action", "Try failed or timed-out jobs again"),
    Action.RERUN: QT_TRANSLATE_NOOP("Action", "Queue a new job with the same settings and seed"),
    Action.UP: QT_TRANSLATE_NOOP("Action", "Raise priority: runs sooner"),
    Action.DOWN: QT_TRANSLATE_NOOP("Action", "Lower priority: runs later"),
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
