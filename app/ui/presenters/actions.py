"""Which job actions apply to a selection: straight from the transition table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from app.engine.jobs.states import JobEvent, JobStatus
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
    TOP = QT_TRANSLATE_NOOP("Action", "Move to top")
    BOTTOM = QT_TRANSLATE_NOOP("Action", "Move to bottom")
    STAR = QT_TRANSLATE_NOOP("Action", "Star")
    UPSCALE = QT_TRANSLATE_NOOP("Action", "Upscale ×2")
    VARY = QT_TRANSLATE_NOOP("Action", "Variations…")
    EDIT = QT_TRANSLATE_NOOP("Action", "Edit with words…")
    USE_AS_INIT = QT_TRANSLATE_NOOP("Action", "Use as init image")
    SHOW_IN_FOLDER = QT_TRANSLATE_NOOP("Action", "Show in folder")
    UNDO = QT_TRANSLATE_NOOP("Action", "Undo cancel")

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
    Action.UP: QT_TRANSLATE_NOOP("Action", "One place up the queue: runs sooner (Ctrl+Up)"),
    Action.DOWN: QT_TRANSLATE_NOOP("Action", "One place down the queue: runs later (Ctrl+Down)"),
    Action.TOP: QT_TRANSLATE_NOOP("Action", "Run next: before every other queued job"),
    Action.BOTTOM: QT_TRANSLATE_NOOP("Action", "Run last: after every other queued job"),
    Action.STAR: QT_TRANSLATE_NOOP(
        "Action", "Mark as a favourite (or unmark); favourites are never pruned"
    ),
    Action.UPSCALE: QT_TRANSLATE_NOOP(
        "Action", "Queue a job that enlarges the image twice and redraws its details"
    ),
    Action.VARY: QT_TRANSLATE_NOOP("Action", "Queue images close to this one, with new seeds"),
    Action.EDIT: QT_TRANSLATE_NOOP(
        "Action", 'Change this image as an instruction says ("make it night")'
    ),
    Action.USE_AS_INIT: QT_TRANSLATE_NOOP(
        "Action", "Start a new picture from this image (image to image)"
    ),
    Action.SHOW_IN_FOLDER: QT_TRANSLATE_NOOP(
        "Action", "Open the folder of the image file with the file selected"
    ),
    Action.UNDO: QT_TRANSLATE_NOOP("Action", "Keep the jobs you just cancelled"),
}

# The job list's button bar; the follow-up actions live in its menu and under the image.
ROW_BUTTONS = (Action.UNDO, Action.CANCEL, Action.PAUSE, Action.RESUME, Action.RETRY,
               Action.RERUN, Action.UP, Action.DOWN)  # fmt: skip
# Shown only while they apply (the others are greyed out).
SHOWN_WHEN_APPLICABLE = (Action.UNDO,)
FOLLOW_UPS = (Action.UPSCALE, Action.VARY, Action.EDIT, Action.USE_AS_INIT)
# Actions on one job that the window carries out (the list only says which rows).
FOR_THE_WINDOW = (*FOLLOW_UPS, Action.SHOW_IN_FOLDER)
IMAGE_ACTIONS = (Action.STAR, *FOLLOW_UPS)  # the buttons under the shown image


@dataclass(frozen=True)
class Applicable:
    """The jobs of a selection that an action would move (empty: the action is disabled)."""

    job_ids: tuple[int, ...]

    def __bool__(self) -> bool:
        return bool(self.job_ids)


def applicable(action: Action, rows: Sequence[JobRow]) -> Applicable:
    return Applicable(tuple(row.id for row in rows if applies(action, row)))


def applies(action: Action, row: JobRow) -> bool:
    if row.cancel_pending or action is Action.UNDO:  # being cancelled: Undo, nothing else
        return row.cancel_pending and action is Action.UNDO
    if action in EVENTS:
        return row.allows(EVENTS[action])
    if action is Action.RERUN:
        return row.can_rerun
    if action is Action.STAR:
        return True
    if action is Action.USE_AS_INIT:  # a picture only: the init image is one
        return row.status is JobStatus.SUCCESS and row.has_picture
    if action is Action.SHOW_IN_FOLDER:
        return row.status is JobStatus.SUCCESS and bool(row.output_path)
    if action in (Action.UPSCALE, Action.VARY, Action.EDIT):
        # A parent still queued or running is fine (the child waits), and so is a failed
        # one (retrying it carries the chain on); a cancelled one will never have an image.
        return row.makes_picture and row.status not in (JobStatus.CANCELLED, JobStatus.CANCELLING)
    # Priority only matters while the job still waits for a worker.
    return row.status is JobStatus.PENDING
