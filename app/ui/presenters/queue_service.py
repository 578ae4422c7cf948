"""The GUI's only door to the job store: small pages, counts, timelines and user requests.

Qt-free and synchronous; the view-model runs these calls on its database thread, so a
slow disk or a locked database never freezes the window. Errors a user can act on come
back as readable messages, never as tracebacks.

The store may be opened late (`opener`): the window shows first, and the database stack
(SQLAlchemy, a second of imports on a busy machine) loads on the database thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.paths import OutsideItsFolder, recorded_file
from app.engine.workers.worker_states import WorkerRequest, WorkerSummary
from app.errors import BadInput, UserError
from app.ui.presenters.i18n import translate
from app.ui.presenters.rows import JobRow, NoteRow, TransitionRow

if TYPE_CHECKING:
    from app.engine.history.eta import Estimator
    from app.engine.jobs.changes import ChangeWatcher
    from app.engine.jobs.follow_ups import FollowUps, NewJob
    from app.engine.jobs.queue import JobQueue
    from app.ui.presenters.word_edits import WordEdit

log = logging.getLogger(__name__)

PAGE_SIZE = 60
QUEUED_SHOWN = 500  # queued jobs listed in the queue's order at the top (more wait below the fold)
RELEARN_S = 30.0  # how often queued jobs' run times are learned again from the history
NOT_OPEN = -1  # data_version before the store is open: "no news"


@dataclass(frozen=True)
class Outcome:
    """What a batch request did: the jobs it touched and a message per job it could not."""

    job_ids: tuple[int, ...] = ()
    errors: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class CancelOutcome:
    """A cancel that can be undone for queued jobs (`cancel_undoably`).

    `held`: queued or paused jobs, held PAUSED (no worker takes them) until `finish_cancel`,
    with the pending cancel stored (if the window dies first, the next launch finishes it);
    `requeue_on_undo`: those of them that were queued, which `undo_cancel` queues again;
    `stopped`: running jobs, cancelled at once: their progress is lost.
    """

    held: tuple[int, ...] = ()
    requeue_on_undo: tuple[int, ...] = ()
    stopped: tuple[JobRow, ...] = ()
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """One refresh of the list: the newest page, fresh copies of loaded jobs that may
    still change, and the per-status counts."""

    rows: tuple[JobRow, ...]
    updates: dict[int, JobRow | None]  # job id -> its row now (None: gone)
    counts: dict[JobStatus, int]
    search_problem: str = ""  # the search text cannot be understood: why (rows are empty)
    # The queued jobs in the queue's order (priority, then age; model-aware claims may take a
    # job for a loaded model sooner), shown first; None when the list is not in that order
    # (a search, a filter without them).
    queued: tuple[JobRow, ...] | None = None


class InitImageProblem(BadInput):
    """An image that cannot be an init image; the message is one sentence for the banner."""


@dataclass(frozen=True)
class InitImage:
    """An init image as the engine will use it (RGB PNG, sides fitted to the model limits)."""

    png: bytes
    width: int
    height: int
    notes: tuple[str, ...] = ()  # conversions made, to tell the user
    params: GenerationParams | None = None  # the settings of the job it came from
    source: str = ""  # where it came from: "#12", a file name, "the clipboard"


class QueueService:
    def __init__(
        self,
        queue: JobQueue | None = None,
        *,
        opener: Callable[[], JobQueue] | None = None,
        max_attempts: int = 3,
        check: Callable[[GenerationParams], object] | None = None,
        outputs_dir: Callable[[], Path] | None = None,
    ) -> None:
        """`check`: what a worker would refuse, raised as a `UserError` before anything is
        stored (the app hands in the model-file check; tests may leave it out).
        `outputs_dir`: this machine's outputs folder, whose `fetched` folder caches images
        made on other machines (default: the one in the saved settings)."""
        if queue is None and opener is None:
            raise ValueError("give a queue or a way to open one")
        self._queue = queue
        self._opener = opener
        self.max_attempts = max_attempts
        self._check = check
        self._watch: ChangeWatcher | None = None
        self._estimator: Estimator | None = None
        self._learned_at = 0.0
        self._open_error: Exception | None = None
        self._outputs_dir = outputs_dir or _saved_outputs_dir
        # Images made on another machine, fetched here once: job id -> local copy (None:
        # the database holds none; asked once, a finished job's image never arrives later).
        self._fetched: dict[int, Path | None] = {}

    @property
    def check(self) -> Callable[[GenerationParams], object] | None:
        """What a worker would refuse, for requests built elsewhere (`group_requests`)."""
        return self._check

    @property
    def queue(self) -> JobQueue:
        if self._queue is None:
            if self._open_error is not None:  # tried once and failed: say so again, fast
                raise self._open_error
            assert self._opener is not None
            try:
                self._queue = self._opener()
            except Exception as error:
                self._open_error = error
                raise
        return self._queue

    @property
    def is_open(self) -> bool:
        return self._queue is not None

    # --- change detection (GUI thread; microseconds) ------------------------------------------

    def data_version(self) -> int | None:
        """A counter that changes when anyone commits; None when the store can't tell."""
        if self._queue is None:
            return NOT_OPEN
        if self._watch is None:
            self._watch = self._queue.change_watcher()
        return self._watch.version()

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    # --- reads (database thread) --------------------------------------------------------------

    def snapshot(
        self,
        statuses: Iterable[JobStatus] | None,
        limit: int,
        watch: Sequence[int] = (),
        search: str = "",
        starred: bool = False,
    ) -> Snapshot:
        """The newest `limit` jobs, plus fresh rows for `watch` (loaded jobs that may change).

        Older pages are not re-read as a whole: finished jobs do not change, and the caller
        watches only the unfinished ones it shows, a handful of single-row reads.
        """
        wanted = None if statuses is None else frozenset(statuses)
        if search.strip() or starred:
            return self._search(wanted, limit, search, starred=starred)
        rows = self._rows(self.queue.jobs(wanted, limit=limit))
        updates: dict[int, JobRow | None] = {}
        for row in self._rows(self._jobs(watch)):
            updates[row.id] = row if _matches(row, wanted) else None
        for job_id in watch:
            updates.setdefault(job_id, None)  # gone from the store
        queued = None
        if wanted is None or JobStatus.PENDING in wanted:
            queued = self.queued_in_order(QUEUED_SHOWN)
            if len(queued) < QUEUED_SHOWN:  # every queued job is in `queued`
                rows, updates = self._caught_up(rows, updates, queued, wanted)
        return Snapshot(rows, updates, self.queue.count_by_status(), queued=queued)

    def _caught_up(
        self,
        rows: tuple[JobRow, ...],
        updates: dict[int, JobRow | None],
        queued: tuple[JobRow, ...],
        wanted: frozenset[JobStatus] | None,
    ) -> tuple[tuple[JobRow, ...], dict[int, JobRow | None]]:
        """Rows read as queued that the queued list, read a moment later, lacks: a worker
        claimed them in between. Read again, so the list neither drops them for a refresh
        (losing the selection: the image of a selected job never showed) nor shows them
        twice. `rows` and `queued` are separate reads; this is what joins them up."""
        in_line = {row.id for row in queued}
        stale = {
            r.id for r in (*rows, *updates.values())
            if r is not None and r.status is JobStatus.PENDING and r.id not in in_line
        }  # fmt: skip
        if not stale:
            return rows, updates
        fresh = {row.id: row for row in self._rows(self._jobs(sorted(stale)))}

        def now(row: JobRow) -> JobRow | None:
            again = fresh.get(row.id)
            return again if again is not None and _matches(again, wanted) else None

        kept = tuple(r for row in rows if (r := now(row) if row.id in stale else row) is not None)
        updated = {
            job_id: now(row) if row is not None and job_id in stale else row
            for job_id, row in updates.items()
        }
        return kept, updated

    def queued_in_order(self, limit: int) -> tuple[JobRow, ...]:
        """The queued jobs in the queue's order: higher priority first, then older; each with
        its place (`JobRow.queue_position`), whether a live worker holds its model loaded
        and, if none does, the load it expects (its ETA counts it too).

        The order the artist arranges (drags, Top, Up), not a forecast of the claims: a
        worker takes a job for a model it holds first, within the affinity bound, and which
        worker frees up first is not known here; the rows say which models are loaded."""
        pending = self.queue.jobs([JobStatus.PENDING], limit=None)
        pending.sort(key=lambda job: (-job.priority, job.id))
        held = self.queue.models_held()
        rows = self._rows(pending[:limit], held=held)
        loads = self._learned()

        def placed(row: JobRow, place: int) -> JobRow:
            if row.params.model in held:
                return replace(row, queue_position=place, model_loaded=True)
            load_s = loads.load_estimate(row.params.model) or None  # 0: no load timed yet
            return replace(row, queue_position=place, model_loaded=False, load_s=load_s)

        return tuple(placed(row, place) for place, row in enumerate(rows, 1))

    def _search(
        self, statuses: frozenset[JobStatus] | None, limit: int, text: str, *, starred: bool
    ) -> Snapshot:
        """The newest `limit` jobs whose prompt matches `text` (the history's word search);
        `starred`: only favourites."""
        from app.engine.history.search import BadSearch, JobFilter, search

        counts = self.queue.count_by_status()
        wanted = JobFilter(text, frozenset(statuses or ()), starred=True if starred else None)
        try:
            jobs = search(self.queue, wanted, limit=limit)
        except BadSearch as error:
            return Snapshot((), {}, counts, search_problem=_readable(error))
        return Snapshot(self._rows(jobs), {}, counts)

    def page(
        self, statuses: Iterable[JobStatus] | None, before_id: int, limit: int = PAGE_SIZE
    ) -> tuple[JobRow, ...]:
        return self._rows(self.queue.jobs(statuses, limit=limit, before_id=before_id))

    def finished(self, limit: int) -> tuple[JobRow, ...]:
        """The newest finished images (the gallery)."""
        return self._rows(self.queue.jobs([JobStatus.SUCCESS], limit=limit))

    def job(self, job_id: int) -> JobRow | None:
        rows = self._rows(self._jobs([job_id]))
        return rows[0] if rows else None

    def _jobs(self, job_ids: Iterable[int]) -> list[Any]:
        from app.engine.jobs.queue import JobNotFound

        jobs = []
        for job_id in job_ids:
            try:
                jobs.append(self.queue.get(job_id))
            except JobNotFound:
                continue
        return jobs

    def timeline(self, job_id: int) -> tuple[TransitionRow, ...]:
        from app.engine.jobs.queue import JobNotFound

        try:
            return tuple(TransitionRow.from_transition(t) for t in self.queue.timeline(job_id))
        except JobNotFound:
            return ()

    def timeline_and_notes(
        self, job_id: int
    ) -> tuple[tuple[TransitionRow, ...], tuple[NoteRow, ...]]:
        """The transitions and the notes beside them (`engine.jobs.notes`: callback tries)."""
        rows = self.timeline(job_id)
        notes = tuple(NoteRow.from_note(note) for note in self.queue.notes(job_id))
        return rows, notes

    def queue_eta_s(self, workers: int) -> float | None:
        """Seconds until the queued and running jobs are done, learned from the history of
        finished jobs (None before any job finished: nothing to learn from)."""
        from app.engine.history.eta import learned, queue_estimate

        waiting = [*self.queue.running_jobs(), *self.queue.jobs([JobStatus.PENDING], limit=None)]
        return queue_estimate(learned(self.queue), waiting, workers=max(1, workers)).seconds

    def stats(self, days: float | None) -> dict[str, Any]:
        """The history's figures for the last `days` (None: all of it), as plain data."""
        from app.engine.history.stats import history_stats

        until = self.queue.clock() + 1  # the history is in the store's time
        since = 0.0 if days is None else until - days * 86400
        return history_stats(self.queue, since, until).as_dict()

    def workers(self, timeout_s: float) -> tuple[WorkerSummary, ...]:
        """Every worker of every machine (the Workers panel); `timeout_s`: the liveness
        timeout after which a silent worker shows as lost."""
        from app.engine.workers.roster import list_workers

        return tuple(list_workers(self.queue, timeout_s=timeout_s))

    def ask_worker(self, worker_id: str, request: WorkerRequest, timeout_s: float) -> Outcome:
        """Drain or stop one worker; a worker gone meanwhile comes back as a message."""
        from app.engine.workers.roster import request_workers
        from app.engine.workers.worker_states import FROM_PANEL

        try:
            request_workers(
                self.queue, worker_id, request, requested_by=FROM_PANEL, timeout_s=timeout_s
            )
        except UserError as error:
            return Outcome(errors=(_readable(error),))
        return Outcome()

    def running_ids(self) -> tuple[int, ...]:
        if self._queue is None:
            return ()
        return tuple(job.id for job in self._queue.running_jobs() if job.id is not None)

    def _rows(self, jobs: Iterable[Any], held: Collection[str] | None = None) -> tuple[JobRow, ...]:
        """`held`: the models live workers hold; a queued job for another expects its load."""
        jobs = list(jobs)
        ran = self.queue.running_times([job.id for job in jobs])
        return tuple(
            self._with_estimate(
                job,
                self._with_reason(
                    self._with_local_image(job, JobRow.from_job(job, ran.get(job.id, (0.0, None))))
                ),
                held,
            )
            for job in jobs
        )

    def _with_local_image(self, job: Any, row: JobRow) -> JobRow:
        """A finished image made on another machine (no file here) gets a local copy, fetched
        from the database on this thread into the outputs folder's `fetched` cache: the image
        area, the thumbnails, the viewer, Copy and Open folder then read it like any other file.

        A shared store's row may be a peer's, naming any file: only an image inside this
        machine's outputs folder is read from where the row says; any other path is dropped."""
        if not self.queue.shares_files:
            return row
        own = recorded_file(row.output_path, shared=True, folders=[self._outputs_dir()])
        if own is not None and own.is_file():
            return row
        if row.status is not JobStatus.SUCCESS:
            return replace(row, output_path=None) if row.output_path else row
        local = self._fetched.get(row.id)
        if row.id not in self._fetched or (local is not None and not local.is_file()):
            local = self._fetch_image(job)  # never asked, or the copy was deleted since
        return replace(row, output_path=str(local) if local is not None else None)

    def _fetch_image(self, job: Any) -> Path | None:
        from app.engine.store.stored_files import queue_output_file

        try:
            local = queue_output_file(self.queue, job, self._outputs_dir())
        except OSError as error:  # no room or no right to write here: try again next time
            log.warning("job %s: could not copy its image here: %s", job.id, error)
            return None
        except OutsideItsFolder as error:  # a peer's row: never written, never asked again
            log.warning("%s", error)
            local = None
        self._fetched[job.id] = local
        return local

    def _with_estimate(self, job: Any, row: JobRow, held: Collection[str] | None = None) -> JobRow:
        """A queued row gets its learned run time (the history's ETA, re-learned now and
        then: finished jobs change it slowly, and a refresh must stay cheap), with the
        model's load when `held` (the models live workers hold) lacks it."""
        if row.status is not JobStatus.PENDING:
            return row
        from app.engine.history.eta import job_estimate

        return replace(row, expected_s=job_estimate(self._learned(), job, held=held))

    def _learned(self) -> Estimator:
        from app.engine.history.eta import learned

        now = time.monotonic()
        if self._estimator is None or now - self._learned_at > RELEARN_S:
            self._estimator, self._learned_at = learned(self.queue), now
        return self._estimator

    def _with_reason(self, row: JobRow) -> JobRow:
        """A BLOCKED row gets the reason it waits (a read of its parents: they are few)."""
        if row.status is not JobStatus.BLOCKED:
            return row
        from app.engine.jobs.graph import waiting_reason

        return replace(row, waiting=waiting_reason(self.queue, row.id))

    # --- requests (database thread) -----------------------------------------------------------

    def submit(
        self,
        params: GenerationParams,
        count: int = 1,
        *,
        init_png: bytes | None = None,
        upscale: bool = False,
        last_png: bytes | None = None,
    ) -> Outcome:
        """Queue `count` jobs in one transaction; with a random seed each gets its own,
        else seeds count up. `init_png`: an image prepared by `prepare_init` (img2img).
        `upscale`: each job also gets its upscale child, queued BLOCKED in the same
        transaction, so the chain survives closing the app between the two; a refused
        child queues nothing, its parents included. `last_png`: a clip's last frame."""
        from app.engine.jobs.follow_ups import FollowUps, NewJob, Upscale
        from app.engine.jobs.run_inputs import RunInputs

        inputs = RunInputs(init_image=init_png, last_image=last_png)
        job = NewJob(params, count, inputs=inputs, max_attempts=self.max_attempts)
        follow_ups = FollowUps(upscale=Upscale() if upscale else None)
        return self._submitted(job, follow_ups)

    def submit_job(self, job: NewJob) -> Outcome:
        """One prepared job (the mask editor's inpaint or outpaint), or why it was refused."""
        from app.engine.jobs.follow_ups import FollowUps

        return self._submitted(replace(job, max_attempts=self.max_attempts), FollowUps())

    def edit(self, source: int | bytes, edit: WordEdit) -> Outcome:
        """An edit as the dialog asked for it: of job `source`'s picture (its child, waiting
        for it) or of a picture's bytes (a file's, a paste's), or why it was refused."""
        from app.engine.jobs.follow_ups import FollowUps
        from app.engine.store.edits import EditSettings, edit_job, picture_edit_job

        settings = EditSettings(
            edit.instruction, edit.model, edit.steps, edit.cfg, more_images=edit.more_images
        )
        check, attempts = self._check, self.max_attempts
        try:
            if isinstance(source, int):
                job = edit_job(self.queue, source, settings, check=check, max_attempts=attempts)
            else:
                job = picture_edit_job(source, settings, check=check, max_attempts=attempts)
        except UserError as error:
            return Outcome((), (_readable(error),))
        return self._submitted(job, FollowUps())

    def upscale(self, job_ids: Sequence[int]) -> Outcome:
        """An upscale x2 child of each job (it waits BLOCKED while its parent is unfinished)."""
        from app.engine.jobs.follow_ups import FollowUps, Upscale

        return self._follow_each(job_ids, FollowUps(upscale=Upscale()))

    def variations(self, job_id: int, count: int, strength: float | None = None) -> Outcome:
        """`count` img2img children of the job's image, with new seeds, at `strength`
        (None: the engine's default)."""
        from app.engine.jobs.follow_ups import FollowUps, Variations

        wanted = Variations(count) if strength is None else Variations(count, strength)
        return self._follow_each([job_id], FollowUps(variations=wanted))

    def _submitted(self, job: NewJob | int, follow_ups: FollowUps) -> Outcome:
        """The new jobs and follow-ups (the engine's one way to submit), or why none."""
        from app.engine.jobs.follow_ups import submit_with_follow_ups

        try:
            submitted = submit_with_follow_ups(self.queue, job, follow_ups, check=self._check)
        except UserError as error:
            return Outcome((), (_readable(error),))
        return Outcome(submitted.all)

    def _follow_each(self, job_ids: Sequence[int], follow_ups: FollowUps) -> Outcome:
        """The follow-ups of each stored job, each on its own: one refused (a job deleted
        meanwhile) leaves the others' queued, and says why."""
        new_ids: list[int] = []
        errors: list[str] = []
        for job_id in job_ids:
            outcome = self._submitted(job_id, follow_ups)
            new_ids.extend(outcome.job_ids)
            errors.extend(outcome.errors)
        return Outcome(tuple(new_ids), tuple(errors))

    def init_from_job(self, job_id: int) -> InitImage:
        """A finished job's image, ready to be an init image, with its settings."""
        row = self.job(job_id)
        if row is None or not row.output_path:
            raise InitImageProblem(translate("QueueService", "Job {id} has no image").format(
                id=job_id))  # fmt: skip
        try:
            data = Path(row.output_path).read_bytes()
        except OSError as error:
            raise InitImageProblem(
                translate("QueueService", "Cannot read {path}: {error}").format(
                    path=row.output_path, error=error.strerror or error
                )
            ) from error
        # Its own settings, but not its init image: the new job starts from this image.
        params = replace(row.params, init_image="", strength=1.0, mask="")
        return replace(self.prepare_init(data), params=params, source=f"#{job_id}")

    @staticmethod
    def prepare_init(data: bytes | Path, source: str = "") -> InitImage:
        """An image (its bytes, or a file) checked and converted for img2img, or
        `InitImageProblem` saying why not. Reads the file: call it off the GUI thread."""
        from app.engine.jobs.init_image import prepare_init_image, read_init_image

        try:
            prepared = prepare_init_image(read_init_image(data) if isinstance(data, Path) else data)
        except UserError as error:
            raise InitImageProblem(_readable(error)) from error
        return InitImage(prepared.png, prepared.width, prepared.height, tuple(prepared.notes),
                         source=source)  # fmt: skip

    def request(self, event: JobEvent, job_ids: Sequence[int]) -> Outcome:
        from app.engine.jobs.queue import JobQueue

        action = {
            JobEvent.CANCEL: JobQueue.cancel,
            JobEvent.PAUSE: JobQueue.pause,
            JobEvent.RESUME: JobQueue.resume,
            JobEvent.RETRY: JobQueue.retry,
        }[event]
        if event is JobEvent.RETRY:
            return self._each(job_ids, self._retry)
        return self._each(job_ids, lambda job_id: action(self.queue, job_id))

    def _retry(self, job_id: int) -> None:
        """Retry by hand; the row keeps the step the job's saved checkpoint reached, as
        the retry policy's does (the worker continues from there)."""
        from app.engine.store.stored_files import retry_from_saved_step

        retry_from_saved_step(self.queue, job_id)

    def cancel_undoably(self, job_ids: Sequence[int]) -> CancelOutcome:
        """Hold queued and paused jobs (PAUSED, the pending cancel stored with them) so the
        cancel can be undone; cancel the others now."""
        from app.engine.jobs.undo import UNDO_DEADLINE_S, Hold, hold_for_undo

        held: list[int] = []
        requeue: list[int] = []
        stopped: list[JobRow] = []
        errors: list[str] = []
        cancel_after = self.queue.clock() + UNDO_DEADLINE_S  # compared by any process
        for job_id in job_ids:
            row = self.job(job_id)
            if row is None:  # deleted meanwhile: nothing to cancel
                continue
            try:
                hold = hold_for_undo(self.queue, job_id, cancel_after=cancel_after)
                if hold is not None:
                    held.append(job_id)
                    requeue.extend([job_id] if hold is Hold.QUEUED else [])
                else:  # running (or claimed just now), failed, blocked: no undo
                    self.queue.cancel(job_id)
                    stopped.extend([row] if row.status.is_running else [])
            except UserError as error:
                errors.append(_readable(error))
        return CancelOutcome(tuple(held), tuple(requeue), tuple(stopped), tuple(errors))

    def finish_cancel(self, job_ids: Sequence[int]) -> Outcome:
        """Cancel the held jobs whose cancel is still pending (one resumed meanwhile stays)."""
        from app.engine.jobs.undo import finish

        return self._each(job_ids, lambda job_id: finish(self.queue, job_id))

    def undo_cancel(self, held: CancelOutcome) -> Outcome:
        """Take the cancel back: queued jobs are queued again, paused ones stay paused."""
        from app.engine.jobs.undo import undo

        requeue = set(held.requeue_on_undo)
        return self._each(
            held.held, lambda job_id: undo(self.queue, job_id, requeue=job_id in requeue)
        )

    def rerun(self, job_ids: Sequence[int]) -> Outcome:
        new_ids: list[int] = []
        outcome = self._each(job_ids, lambda job_id: new_ids.append(self.queue.rerun(job_id)))
        return Outcome(tuple(new_ids), outcome.errors)

    def move(self, job_ids: Sequence[int], delta: int) -> Outcome:
        """Raise (delta > 0) or lower the priority: higher runs sooner."""
        return self._each(job_ids, lambda job_id: self.queue.raise_priority(job_id, by=delta))

    def move_to(self, job_ids: Sequence[int], top: bool) -> Outcome:
        """To the top (runs next) or bottom of the pending jobs; their order is kept."""
        from app.engine.jobs.queue import Placement

        ordered = list(reversed(job_ids)) if top else list(job_ids)  # the first ends up first
        place = Placement.TOP if top else Placement.BOTTOM
        return self._each(ordered, lambda job_id: self.queue.move(job_id, to=place))

    def move_before(self, job_ids: Sequence[int], before: int) -> Outcome:
        """Queued jobs dragged onto another queued job: they go just before it, in order."""
        return self._each(job_ids, lambda job_id: self.queue.move(job_id, before=before))

    def star(self, job_ids: Sequence[int], on: bool) -> Outcome:
        """Star or unstar (also recorded in the image file, when there is one)."""
        from app.engine.history.favourites import star

        return self._each(job_ids, lambda job_id: star(self.queue, job_id, on=on))

    def delete_finished(self, job_ids: Sequence[int]) -> Outcome:
        """Delete finished jobs with their images, history and checkpoints (the gallery's
        Delete, once its undo time is over): the prune's path and rules. `errors`: why a job
        was kept (starred, a parent of a job that stays)."""
        from app.engine import paths
        from app.engine.history.retention import delete_jobs

        report = delete_jobs(self.queue, job_ids, checkpoints_dir=paths.checkpoints_dir())
        return Outcome(
            tuple(report.removed), tuple(line[:1].upper() + line[1:] for line in report.skipped)
        )

    def _each(self, job_ids: Sequence[int], do: Callable[[int], object]) -> Outcome:
        done, errors = [], []
        for job_id in job_ids:
            try:
                do(job_id)
                done.append(job_id)
            except UserError as error:
                errors.append(_readable(error))
        return Outcome(tuple(done), tuple(errors))


def _saved_outputs_dir() -> Path:
    from app.engine.settings import load_settings

    return load_settings().outputs_path()


def _matches(row: JobRow, statuses: frozenset[JobStatus] | None) -> bool:
    return statuses is None or row.status in statuses


def _readable(error: Exception) -> str:
    text = str(error)
    return text[:1].upper() + text[1:] if text else type(error).__name__
