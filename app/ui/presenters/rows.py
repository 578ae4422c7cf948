"""Immutable snapshots of jobs and transitions for the views, plus their display text.

Qt-free: built on the database thread from `Job` / `JobTransition`, read on the GUI thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.states import JobEvent, JobStatus, allowed_events
from app.engine.outputs.kinds import OutputKind
from app.engine.outputs.registry import UnknownOutputKind, output_of_job
from app.engine.workers.liveness import WorkerIdentity, this_host
from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate

if TYPE_CHECKING:  # the database stack loads after the window shows (see app.ui.main)
    from app.engine.jobs.queue import Job, JobNote, JobTransition

ACTIVE = frozenset(
    {JobStatus.PENDING, JobStatus.PROCESSING, JobStatus.CANCELLING, JobStatus.PAUSING,
     JobStatus.PAUSED}
)  # fmt: skip
# Done: an image came out. Cancelled jobs are not done (issue 28.7): they show under All.
DONE = frozenset({JobStatus.SUCCESS})
FAILED = frozenset({JobStatus.FAILED, JobStatus.TIMEOUT})


class ListFilter(StrEnum):
    """The job list's status filters; the value is the English name, translated on the
    button (`filter_label`). Order is the order of the filter buttons."""

    ALL = QT_TRANSLATE_NOOP("Filter", "All")
    ACTIVE = QT_TRANSLATE_NOOP("Filter", "Active")
    DONE = QT_TRANSLATE_NOOP("Filter", "Done")
    FAILED = QT_TRANSLATE_NOOP("Filter", "Failed")
    STARRED = QT_TRANSLATE_NOOP("Filter", "Starred")  # favourites, whatever their status


# Filter -> statuses shown (None: all).
FILTERS: dict[ListFilter, frozenset[JobStatus] | None] = {
    ListFilter.ALL: None,
    ListFilter.ACTIVE: ACTIVE,
    ListFilter.DONE: DONE,
    ListFilter.FAILED: FAILED,
    ListFilter.STARRED: None,
}
# Filters that pick by something else than the status (read like a search: one page).
STARRED_ONLY = frozenset({ListFilter.STARRED})


def filter_label(name: ListFilter) -> str:
    """A filter's name on its button (the English name stays its key)."""
    text = translate("Filter", name.value)
    return f"★ {text}" if name is ListFilter.STARRED else text


def status_label(status: JobStatus, *, given_up: bool = False) -> str:
    """A status as the badge and tooltips name it ("Gave up": no automatic retry comes)."""
    if given_up:
        return translate("Status", "Gave up")
    return translate("Status", STATUS_NAMES[status])


STATUS_NAMES = {
    JobStatus.BLOCKED: QT_TRANSLATE_NOOP("Status", "Blocked"),
    JobStatus.PENDING: QT_TRANSLATE_NOOP("Status", "Pending"),
    JobStatus.PROCESSING: QT_TRANSLATE_NOOP("Status", "Processing"),
    JobStatus.CANCELLING: QT_TRANSLATE_NOOP("Status", "Cancelling"),
    JobStatus.PAUSING: QT_TRANSLATE_NOOP("Status", "Pausing"),
    JobStatus.PAUSED: QT_TRANSLATE_NOOP("Status", "Paused"),
    JobStatus.SUCCESS: QT_TRANSLATE_NOOP("Status", "Success"),
    JobStatus.FAILED: QT_TRANSLATE_NOOP("Status", "Failed"),
    JobStatus.TIMEOUT: QT_TRANSLATE_NOOP("Status", "Timeout"),
    JobStatus.CANCELLED: QT_TRANSLATE_NOOP("Status", "Cancelled"),
}


@dataclass(frozen=True)
class JobRow:
    id: int
    params: GenerationParams
    status: JobStatus
    attempt: int
    max_attempts: int
    given_up: bool
    priority: int
    progress_step: int
    progress_total: int
    created_at: float
    started_at: float | None
    finished_at: float | None
    output_path: str | None
    error: str | None
    rerun_of: int | None
    version: int
    created_label: str = ""  # formatted off the GUI thread: strftime per paint adds up
    # Time in PROCESSING over every attempt, from the history (`app.engine.jobs.durations`):
    # the finished stretches, and when the current one began if the job is in one now.
    ran_s: float = 0.0
    running_since: float | None = None
    expected_s: float | None = None  # a queued job's learned run time (None: nothing to go on)
    starred: bool = False  # a favourite: kept by pruning, marked in the list and gallery
    waiting: str = ""  # why a BLOCKED job still waits ("waiting for #12, which failed: ...")
    # The machine of its latest attempt ("": never picked up; every attempt's is in the
    # timeline), and whether that is another computer than this one.
    machine: str = ""
    ran_elsewhere: bool = False
    # A member of a group (a batch, a grid): its group and place there; a grid's composing
    # job has a group and no cell (`kind` "grid").
    group_id: int | None = None
    group_cell: int | None = None
    # Cancelled in the window and held a few seconds for its Undo (`job.cancel_after`): it
    # shows as being cancelled, and Undo is the only thing to do with it.
    cancel_pending: bool = False
    # A queued job's place in the queue's order (priority, then age; 1: first); 0: not known.
    # Not a promise of the run order: a worker takes a job for a model it holds loaded first,
    # within the affinity bound (`app.engine.jobs.affinity`).
    queue_position: int = 0
    # A queued job's model: whether a live worker holds it loaded (None: not known, the row
    # is not in the queued list), and the load it expects if not (None: none learned yet).
    model_loaded: bool | None = None
    load_s: float | None = None

    @classmethod
    def from_job(cls, job: Job, ran: tuple[float, float | None] = (0.0, None)) -> JobRow:
        assert job.id is not None
        identity = WorkerIdentity.parse(job.worker_id)
        machine = identity.host if identity is not None else (job.worker_id or "")
        params = GenerationParams(
            prompt=job.prompt, negative_prompt=job.negative_prompt, model=job.model,
            scheduler=job.scheduler, steps=job.steps, cfg=job.cfg, width=job.width,
            height=job.height, seed=job.seed, init_image=job.init_image, strength=job.strength,
            mask=job.mask, mask_blur=job.mask_blur, only_masked=job.only_masked,
            mask_padding=job.mask_padding,
            variation_seed=job.variation_seed, variation_strength=job.variation_strength,
            prompt_template=job.prompt_template, kind=job.kind, upscaler=job.upscaler,
            speed=job.speed, speed_threshold=job.speed_threshold, compile=job.compile,
            frames=job.frames, fps=job.fps,
        )  # fmt: skip
        return cls(
            id=job.id, params=params, status=JobStatus(job.status), attempt=job.attempt,
            max_attempts=job.max_attempts, given_up=job.given_up, priority=job.priority,
            progress_step=job.progress_step, progress_total=job.progress_total,
            created_at=job.created_at, started_at=job.started_at, finished_at=job.finished_at,
            output_path=job.output_path, error=job.error, rerun_of=job.rerun_of,
            version=job.version, created_label=format_clock(job.created_at), ran_s=ran[0],
            running_since=ran[1], starred=job.starred, machine=machine,
            ran_elsewhere=bool(machine) and machine != this_host(),
            group_id=job.group_id, group_cell=job.group_cell,
            cancel_pending=job.cancel_after is not None,
        )  # fmt: skip

    @property
    def prompt(self) -> str:
        return self.params.prompt

    @property
    def after(self) -> int | None:
        """The job whose image this one builds on (upscale, variation), if any."""
        return self.params.init_parent

    @property
    def output_kind(self) -> OutputKind | None:
        """The kind of output the job leaves, which says how its thumbnail is made and how
        the gallery shows it. None: a kind this Easel does not make (a newer Easel's job on
        a shared queue), shown without a picture."""
        try:
            return output_of_job(self.params.kind)
        except UnknownOutputKind:
            return None

    @property
    def makes_picture(self) -> bool:
        """Its kind of output is one picture, which a follow-up (upscale, variation, init
        image, mask editor, Control section) can start from; a video is not one."""
        kind = self.output_kind
        return kind is not None and kind.is_picture

    @property
    def has_picture(self) -> bool:
        """A finished output that is one picture."""
        return bool(self.output_path) and self.makes_picture

    def allows(self, event: JobEvent) -> bool:
        if self.cancel_pending:  # only Undo, until the cancel is done or taken back
            return False
        return event in allowed_events(self.status)

    @property
    def status_text(self) -> str:
        """The status as the row shows it ("Being cancelled" while Undo can take it back)."""
        if self.cancel_pending:
            return translate("Status", "Being cancelled")
        return status_label(self.status, given_up=self.given_up)

    @property
    def may_change(self) -> bool:
        """Still moving, or may be retried automatically: worth re-reading on a refresh."""
        return self.status in ACTIVE or (self.status in FAILED and not self.given_up)

    @property
    def can_rerun(self) -> bool:
        # The queue re-runs only finished or cancelled jobs (a new job pointing back).
        return self.status.is_terminal

    def duration_s(self, now: float | None = None) -> float | None:
        """Total running time over every attempt, the current stretch included; None if the
        job never ran."""
        if self.running_since is None:
            return self.ran_s if self.ran_s > 0 else None
        return self.ran_s + max(0.0, (now or time.time()) - self.running_since)


@dataclass(frozen=True)
class TransitionRow:
    id: int
    attempt: int
    from_status: JobStatus | None
    to_status: JobStatus
    event: JobEvent
    source: str
    message: str
    at: float

    @classmethod
    def from_transition(cls, t: JobTransition) -> TransitionRow:
        assert t.id is not None
        return cls(
            id=t.id, attempt=t.attempt,
            from_status=JobStatus(t.from_status) if t.from_status else None,
            to_status=JobStatus(t.to_status), event=JobEvent(t.event), source=t.source,
            message=t.message, at=t.at,
        )  # fmt: skip


@dataclass(frozen=True)
class NoteRow:
    """A note in a job's timeline: something that happened to it without a change of its
    status, such as a try of its HTTP callback (`engine.jobs.notes`)."""

    id: int
    attempt: int
    source: str
    message: str
    at: float

    @classmethod
    def from_note(cls, note: JobNote) -> NoteRow:
        assert note.id is not None
        return cls(note.id, note.attempt, note.source, note.message, note.at)


TimelineRow = TransitionRow | NoteRow


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        shown = f"{seconds:.1f}" if seconds < 10 else f"{seconds:.0f}"
        return translate("Duration", "{n} s").format(n=shown)
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return translate("Duration", "{n} min").format(n=f"{minutes}:{secs:02d}")
    hours, minutes = divmod(minutes, 60)
    return translate("Duration", "{n} h").format(n=f"{hours}:{minutes:02d}")


def format_clock(at: float, now: float | None = None) -> str:
    """Time of day for today, date and time otherwise (a list of jobs spans days)."""
    moment = datetime.fromtimestamp(at)
    today = datetime.fromtimestamp(now or time.time()).date()
    if moment.date() == today:
        return moment.strftime("%H:%M:%S")
    # Translators: a strftime format; %b is an English month name whatever the language.
    return moment.strftime(translate("Clock", "%b %d %H:%M"))


def eta_s(step: int, total: int, elapsed_s: float) -> float | None:
    """Remaining seconds at the average pace so far; None until a step has been done."""
    if step <= 0 or total <= 0 or elapsed_s <= 0 or step >= total:
        return None
    return elapsed_s / step * (total - step)
