"""One claimed job inside a worker: heartbeat, generate with a step checkpoint, settle.

The step checkpoint is where the app's requests take effect: it reads the job's status
(a two-column SELECT at every step on SQLite; on PostgreSQL at the step after a
notification names the job, else once a second: `wakeup.JobWatch`) and stops on
CANCELLING or PAUSING; every `checkpoint_interval_s` (stretched by `checkpoint_pacing` so
that saves cost at most 2% of the run) it asks the runner for a rolling checkpoint. A run
whose step is stuck (judged by `stall.StallRule`: no step for a few times the slowest
recent one while its threads used no CPU time, or far longer while they did) is settled
by its own heartbeat thread with TIMEOUT, saying so, and its worker then ends
(`RunContext.on_stuck`) so that a fresh one takes its place.

Settling is one transition: COMPLETE, FAIL or STOPPED, always with this worker's id so a
worker that lost its job (timed out, re-claimed elsewhere) can never settle it; such a
worker stops at the next step checkpoint that reads the row, without writing or deleting
anything.

Checkpoint files belong to one claim (see `checkpoint_files`); a run first adopts the
newest earlier one. What happened to the saved progress (resumed from step k, damaged and
set aside, missing) is said in the message of the run's settling transition.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.engine.generation.errors import CheckpointError, CheckpointMismatch
from app.engine.generation.files.sources import ModelNotInstalled
from app.engine.generation.loop.checkpoint_files import (
    Claim,
    adopt_earlier,
    remove_earlier,
    set_aside,
)
from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    ResumedFrom,
    StepDecision,
    StepProgress,
)
from app.engine.jobs.graph import run_inputs_of
from app.engine.jobs.queue import JobNotFound, JobQueue, NotHoldingJob, params_of
from app.engine.jobs.retry import describe_error, failure_changes
from app.engine.jobs.states import STOPPING_STATUSES, JobEvent, JobStatus, TransitionNotAllowed
from app.engine.outputs.registry import UnknownOutputKind, output_of_job
from app.engine.paths import OutsideItsFolder, is_inside, looks_like_path, recorded_file
from app.engine.store.stored_files import SharedProgress
from app.engine.workers.checkpoint_pacing import paced_interval_s
from app.engine.workers.database_watch import DatabaseFileReplaced
from app.engine.workers.kinds import KindRun, work_of
from app.engine.workers.kinds import RunnerLike as RunnerLike  # its home was here; keep the name
from app.engine.workers.messages import MessageKind
from app.engine.workers.stall import (
    CpuWatch,
    LoadWatch,
    StallRule,
    StepTimer,
    device_floor_s,
)
from app.engine.workers.wakeup import EveryStep, StepReads
from app.engine.workers.worker_states import REQUEUED
from app.errors import DatabaseUnreachable
from app.models.tables import Job

log = logging.getLogger(__name__)

SOURCE = "worker"
DECISIONS = {JobStatus.CANCELLING: StepDecision.CANCEL, JobStatus.PAUSING: StepDecision.PAUSE}
# How the attempt before this one ended, as the "resumed from step k" note words it.
ENDINGS = {JobStatus.TIMEOUT: "crash", JobStatus.FAILED: "failure"}


class LostJob(Exception):
    """Raised at a step checkpoint when this worker no longer holds its job: the runner
    unwinds without writing or deleting anything, and nothing is settled."""


class Send(Protocol):
    """Tell the app something (see `worker.Worker.send`); never blocks."""

    def __call__(self, kind: MessageKind, job_id: int | None = None, **fields: Any) -> None: ...


def _every_step(_job_id: int) -> AbstractContextManager[StepReads]:
    return nullcontext(EveryStep())


def _keep_running() -> None:
    """A run built by hand (tests) has no process to end when it is stuck."""


@dataclass(frozen=True)
class RunContext:
    """What a job run needs from the worker that runs it, and nothing more."""

    queue: JobQueue
    worker_id: str
    runner: RunnerLike
    outputs_dir: Path
    checkpoints_dir: Path
    send: Send
    # The worker is stopping: pause the job in hand, for this reason (None: carry on).
    pause_requested: Callable[[], str | None]
    # After the run paused its job for that reason: why it goes back to the queue (its
    # headless supervisor was gone); None: it stays PAUSED.
    hand_back: Callable[[str], str | None] = lambda _reason: None
    heartbeat_interval_s: float = 3.0
    # Stuck outside the step loop for this long, or while a step's time is unknown (see
    # `stall`); between steps, a few times the slowest recent step with no CPU used.
    stall_limit_s: float = 300.0
    device: str | None = None  # "cuda", "mps", "cpu"; None: a fake runner (see `stall`)
    expected_step_s: float | None = None  # from the ETA's learned run times; None: unknown
    # Called once this run was settled as stuck: the worker ends, to be replaced.
    on_stuck: Callable[[], None] = _keep_running
    progress_interval_s: float = 0.25
    checkpoint_interval_s: float = 0.0  # rolling checkpoints this often; 0: none
    checkpoint_every_steps: int = 0  # and/or every this many steps; 0: none
    watched: bool = True  # someone reads this worker's messages (else no previews are made)
    # When the step checkpoint reads the job's row (see `wakeup`): every step by default.
    watch: Callable[[int], AbstractContextManager[StepReads]] = _every_step


MIN_TICK_S = 0.02  # the row-writing thread never spins, even when told "as often as possible"
# A step is never called stuck within two beats (half the heartbeat timeout), so a stuck
# step is settled within 3 steps + the heartbeat timeout, and a late beat is no stall.
MIN_STALL_BEATS = 2
SETTLE_RETRY_S = 0.5  # a finished run tries to settle this often while the store is away


class Heartbeat:
    """Ticks from a thread while the job is held: the job's row gets its heartbeat and
    progress from here, so a long step never looks like a dead worker and the step loop
    itself never writes to the database."""

    def __init__(
        self,
        beat: Callable[[], object],
        interval_s: float,
        *,
        ending: Callable[[], object] = lambda: None,
    ) -> None:
        self._beat = beat
        self._interval_s = interval_s
        self._ending = ending  # on the thread, as it ends (e.g. hand its connection on)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self._interval_s + 1.0)

    def _run(self) -> None:
        try:
            self._beat_until_stopped()
        finally:
            self._ending()

    def _beat_until_stopped(self) -> None:
        # A lost job (the beat finds it no longer ours) is noticed at the next step checkpoint.
        while not self._stop.wait(self._interval_s):
            try:
                self._beat()
            except DatabaseUnreachable:
                pass  # said once by the database (`Outage`); the first beat after it writes
            except Exception:  # a locked database for a moment is not a reason to die
                log.exception("heartbeat failed")


class JobRun:
    def __init__(self, context: RunContext, job: Job) -> None:
        self.context = context
        self.queue = context.queue
        self.job = job
        self.job_id = job.id or 0
        self.params = params_of(job)
        self.refused = self._row_problem(job, context)  # the job fails with it, unrun
        outputs = Path(job.output_dir) if job.output_dir else context.outputs_dir
        if self.refused is not None:
            outputs = context.outputs_dir  # nothing is written; never where the row says
        # Where asked, if it was; never over another job's output (ids restart in a new
        # database); named as the job's kind of output is. A kind this Easel does not make
        # (a newer one's job on a shared queue) is refused: its path is never written.
        try:
            self.output_path = output_of_job(self.params.kind).path_in(
                outputs, self.job_id, job.seed
            )
        except UnknownOutputKind as error:
            self.refused, self.output_path = self.refused or error, outputs
        self.claim = Claim(context.checkpoints_dir, self.job_id, job.attempt, job.version)
        self.checkpoint_path = self.claim.file
        self.shared = SharedProgress(self.queue.db, job, self.claim, context.worker_id)
        self.notes: list[str] = []  # for the timeline, in the settling transition's message
        self.lost = False
        self.completed = False  # its image was written and the job is SUCCESS
        self._latest: StepProgress | None = None  # set by the step loop ...
        self._written: StepProgress | None = None  # ... written to the row by the ticker
        self._last_beat = 0.0
        self._last_checkpoint = time.monotonic()
        self._steps = StepTimer(self._last_checkpoint)
        self._stall_rule = StallRule(
            context.stall_limit_s,
            floor_s=device_floor_s(context.device, MIN_STALL_BEATS * context.heartbeat_interval_s),
            expected_step_s=context.expected_step_s,
        )
        self._last_tick = self._last_checkpoint
        self._reads: StepReads = EveryStep()  # the run's own, from `context.watch`
        self._status: JobStatus | None = JobStatus.PROCESSING  # as last read at a step
        self._hand_back: str | None = None  # paused by the run itself, to be queued again
        self._tick_s = max(
            MIN_TICK_S, min(context.progress_interval_s, context.heartbeat_interval_s)
        )
        self._cpu = CpuWatch(self._tick_s)  # sampled by the heartbeat thread only
        self._load = LoadWatch()

    def _row_problem(self, job: Job, context: RunContext) -> Exception | None:
        """What a row from a shared queue (any peer writes rows) asks that this machine
        refuses: an image folder outside its outputs folder, a model named by a path."""
        if not self.queue.shares_files:
            return None  # this machine's own store: its user may name any folder and file
        if job.output_dir and not is_inside(Path(job.output_dir), [context.outputs_dir]):
            return OutsideItsFolder(
                f"job {self.job_id} asks for its image in {job.output_dir!r}, outside this "
                "machine's outputs folder; a job on a shared queue writes only there"
            )
        if looks_like_path(self.params.model):
            return ModelNotInstalled(self.params.model)
        return None

    def run(self) -> None:
        self.context.send(MessageKind.STARTED, self.job_id, total=self.params.denoising_steps)
        context = self.context
        tick_s = self._tick_s
        # The ticker's thread lives this run: its database connection serves the next run's.
        ticker = Heartbeat(self._tick, tick_s, ending=self.queue.db.release_hot_connection)
        with ticker, context.watch(self.job_id) as self._reads:
            try:
                if self.refused is not None:
                    raise self.refused
                self._take_over_progress()
                outcome = self._generate()
            except LostJob:
                log.info("job %s was taken from this worker; dropped its run", self.job_id)
                return
            except DatabaseFileReplaced:
                # Not the job's failure, and nothing can be written: the worker said why.
                log.info("job %s: dropped its run; its database file is gone", self.job_id)
                return
            except DatabaseUnreachable:
                raise  # not the job's failure: the worker runs it again once the store is back
            except Exception as error:
                log.warning("job %s failed: %s", self.job_id, describe_error(error))
                self._fail(error)
                return
        # The row shows the last step before the settling transition (COMPLETE writes the
        # last one itself: no commit of its own, which waited for the disk between jobs). A
        # finished run waits out an outage to settle: its work is done and must not run again.
        if outcome.kind is not OutcomeKind.COMPLETED:
            self._patiently(self._write_progress)
        self._patiently(lambda: self._settle(outcome))

    def _patiently(self, work: Callable[[], None]) -> None:
        while True:
            try:
                work()
                return
            except DatabaseUnreachable:
                if self.context.pause_requested() is not None:
                    raise  # stopping: left held, settled by recovery (the image is on disk)
                time.sleep(SETTLE_RETRY_S)

    def _tick(self) -> None:
        """On the heartbeat thread: note the CPU time the step used; copy a rolling
        checkpoint saved since the last tick into the database; write new progress (which
        also beats), else beat when due."""
        self._cpu.sample(time.monotonic())
        self._note(self.shared.share_checkpoint())
        if self._latest is not self._written:
            self._write_progress()
            return
        now = time.monotonic()
        self._excuse_a_stopped_process(now)
        if now - self._last_beat < self.context.heartbeat_interval_s:
            return
        self._last_beat = now
        stuck = self._stall_rule.verdict(
            self._steps, now, cpu_quiet_s=self._cpu.quiet_s(), load_stretch=self._load.stretch()
        )
        if stuck is not None:
            self._settle_stuck_run(stuck)
            return
        self.queue.heartbeat(self.job_id, self.context.worker_id)

    def _excuse_a_stopped_process(self, now: float) -> None:
        """A tick far later than due means this whole process was stopped (SIGSTOP, a
        suspended machine), the step loop with it: that is no stuck step."""
        gap_s = now - self._last_tick - self._tick_s
        self._last_tick = now
        if gap_s > self._stall_rule.floor_s:
            self._steps.excuse(gap_s)

    def _settle_stuck_run(self, why: str) -> None:
        """On the heartbeat thread: the step loop is stuck, so it cannot settle the job;
        settle it here (TIMEOUT: a cancel still wins, a pause keeps its checkpoint), then let
        the worker end so that a fresh one takes its place."""
        log.error("job %s is stuck: %s; ending this worker", self.job_id, why)
        try:
            self._fire(JobEvent.TIMEOUT, message=f"stuck: {why}")
        finally:
            self.context.on_stuck()

    def _write_progress(self) -> None:
        progress = self._latest  # one read: the step loop may set a newer one meanwhile
        if progress is None or progress is self._written:
            return
        self._written, self._last_beat = progress, time.monotonic()
        self.queue.report_progress(
            self.job_id, self.context.worker_id, progress.step, progress.total
        )

    def _take_over_progress(self) -> None:
        """Adopt the newest checkpoint an earlier claim left (we hold the job now)."""
        recorded = recorded_file(
            self.job.checkpoint_path, shared=self.queue.shares_files,
            folders=[self.context.checkpoints_dir],
        )  # fmt: skip
        if recorded is None and self.job.checkpoint_path:  # another machine's, or a peer's
            log.info("job %s: its row's checkpoint is not in this machine's folder", self.job_id)
        self._note(self.shared.fetch(recorded))  # paused or lost on another machine
        if not adopt_earlier(self.claim, also=recorded) and recorded is not None:
            self.notes.append(
                f"the saved progress ({recorded.name}) was missing; started over from step 0"
            )

    def _generate(self) -> GenerationOutcome:
        work = work_of(self.params.kind)
        run = KindRun(
            self.context.runner, self.queue, self.job, self.params,
            run_inputs_of(self.queue, self.job, self.context.outputs_dir),
            self.output_path, self.checkpoint_path, self.on_step,
        )  # fmt: skip
        try:
            outcome = work(run)
        except CheckpointError as error:
            # Same seed, same image: starting over costs time but never changes the result.
            log.warning("job %s: setting its checkpoint aside: %s", self.job_id, error)
            self.shared.set_aside_copy_of(self.checkpoint_path)
            self.notes.append(_unusable_note(error, set_aside(self.checkpoint_path)))
            outcome = work(run)
        if outcome.resumed_from is not None:
            self.notes.insert(0, self._resumed_note(outcome.resumed_from))
        if outcome.note:
            self.notes.append(outcome.note)
        return outcome

    def _resumed_note(self, resumed: ResumedFrom) -> str:
        ended = next(
            (t for t in reversed(self.queue.timeline(self.job_id)) if t.to_status in ENDINGS),
            None,
        )
        if ended is None or resumed.saved_at <= 0:
            return f"resumed from step {resumed.step}"
        before_s = max(0.0, ended.at - resumed.saved_at)
        ending = ENDINGS[JobStatus(ended.to_status)]
        return f"resumed from step {resumed.step} (saved {before_s:.0f} s before the {ending})"

    # --- the step checkpoint -----------------------------------------------------------------

    def on_step(self, progress: StepProgress) -> StepDecision:
        self._steps.record(time.monotonic(), progress.step, progress.total)
        self._report(progress)
        if self._reads.due():
            self._status = self._current_status()
        status = self._status
        if status is None:
            self.lost = True
            raise LostJob(self.job_id)  # someone else owns the job now: touch nothing
        if status is JobStatus.PROCESSING and (reason := self.context.pause_requested()):
            status = self._pause_for_shutdown(reason)
        decision = DECISIONS.get(status, StepDecision.CONTINUE)
        if decision is StepDecision.CONTINUE and self._checkpoint_due(progress):
            return StepDecision.CHECKPOINT
        return decision

    def _checkpoint_due(self, progress: StepProgress) -> bool:
        if progress.step >= progress.total or progress.saving:
            return False  # the image comes next; or the last save is still being written
        every = self.context.checkpoint_every_steps
        # Stretched so that saves cost at most 2% of the run (a clip's latents are large).
        interval = paced_interval_s(self.context.checkpoint_interval_s, progress.last_save_s)
        now = time.monotonic()
        # Asked a save's length early, so the newest state on disk is never older than the
        # interval (the state of the previous save stays the newest until this one is in);
        # saves slower than half the interval cannot keep that promise and get no more lead.
        lead_s = min(progress.last_save_s + self._copy_lag_s(), interval / 2)
        due = (every > 0 and progress.step % every == 0) or (
            interval > 0 and now - self._last_checkpoint >= interval - lead_s
        )
        if due:
            self._last_checkpoint = now
        return due

    def _copy_lag_s(self) -> float:
        """On a database other machines share, a save is "in" once copied there: the
        heartbeat thread's next tick, then the copy itself."""
        if not self.queue.db.shares_files:
            return 0.0
        return self._tick_s + self.shared.last_copy_s

    def _current_status(self) -> JobStatus | None:
        """The job's status if this worker still holds it, else None. While the store is
        away, the status last read: the job is still ours, and the run goes on."""
        try:
            return self.queue.status_if_held(self.job_id, self.context.worker_id)
        except DatabaseUnreachable:
            return self._status

    def _pause_for_shutdown(self, reason: str) -> JobStatus:
        try:
            record = self._fire(JobEvent.PAUSE, message=reason)
        except DatabaseUnreachable:
            return JobStatus.PROCESSING  # asked again at the next step
        if record is JobStatus.PAUSING:
            self._hand_back = self.context.hand_back(reason)
        return record if record is not None else JobStatus.PROCESSING

    def _report(self, progress: StepProgress) -> None:
        """Tell the app now (a message); the row follows from the heartbeat thread."""
        preview = progress.preview_png if self.context.watched else None
        self.context.send(
            MessageKind.PROGRESS, self.job_id, step=progress.step, total=progress.total,
            elapsed_s=progress.elapsed_s, preview_png=preview,
        )  # fmt: skip
        self._latest = progress

    # --- settling ----------------------------------------------------------------------------

    def _settle(self, outcome: GenerationOutcome) -> None:
        if outcome.kind is OutcomeKind.COMPLETED:
            path = str(outcome.image_path or self.output_path)
            # Tiles and regions are counted as they run: the last total reported.
            steps = self._latest.total if self._latest else self.params.denoising_steps
            done = {
                "output_path": path,
                "error": None,
                "progress_step": steps,
                "progress_total": steps,
            }
            self._note(self.shared.share_output(Path(path)))
            message = self._with_load_note(self._with_notes(f"wrote {path}"), outcome)
            if self._fire(JobEvent.COMPLETE, message=message, changes=done):
                self.completed = True
                remove_earlier(self.claim)  # a late writer's leftovers, if any
                self.context.send(MessageKind.FINISHED, self.job_id, image_path=path)
            return
        changes: dict[str, Any] = {}
        if outcome.kind is OutcomeKind.PAUSED:
            self._note(self.shared.share_checkpoint())  # resumable on any machine
            saved = outcome.checkpoint_path
            changes["checkpoint_path"] = str(saved) if saved is not None else None
            if outcome.unsaved_reason is not None:
                then = "resume from the last saved step" if saved else "start over from step 0"
                self.notes.append(
                    f"the progress could not be saved ({outcome.unsaved_reason}); it will {then}"
                )
        message = self._with_notes("")
        stopped = self._fire(
            JobEvent.STOPPED, message=message, changes=changes, only_from=STOPPING_STATUSES
        )
        if stopped is JobStatus.PAUSED and self._hand_back is not None:
            self._requeue(self._hand_back, outcome)
        if stopped:
            self.context.send(MessageKind.FINISHED, self.job_id)

    def _requeue(self, cause: str, outcome: GenerationOutcome) -> None:
        """Queue the job this run paused again, with the progress it saved, for any worker
        (RESUME: PAUSED -> PENDING, as a person's resume): the supervisor of this headless
        worker is gone, and a render node's work must go on without it. Only if it is still
        ours and PAUSED: a user who resumed or cancelled it meanwhile decided already."""
        saved_now = outcome.checkpoint_path is not None and outcome.unsaved_reason is None
        if saved_now and self._latest is not None:
            what = f"{REQUEUED} {self._latest.step}"
        elif outcome.checkpoint_path is not None:
            what = "requeued with its last saved progress"
        else:
            what = "requeued to start over from step 0"
        paused = frozenset({JobStatus.PAUSED})
        if self._fire(JobEvent.RESUME, message=f"{what}: {cause}", only_from=paused):
            log.info("job %s: %s: %s", self.job_id, what, cause)

    def _note(self, note: str | None) -> None:
        if note is not None:
            self.notes.append(note)

    def _with_notes(self, message: str) -> str:
        return "; ".join([*self.notes, message] if message else self.notes)

    def _with_load_note(self, message: str, outcome: GenerationOutcome) -> str:
        """ "...; model loaded in 6.2 s" (or "model already loaded"), after the rest: on the
        COMPLETE row, where the ETA learns the load apart from the run (`history.eta`)."""
        if not outcome.load_note:
            return message
        return f"{message}; {outcome.load_note}" if message else outcome.load_note

    def _fail(self, error: Exception) -> None:
        failure = failure_changes(error)
        if self._fire(JobEvent.FAIL, message=failure["error"], changes=failure):
            self.context.send(MessageKind.FINISHED, self.job_id, error=describe_error(error))

    def _fire(
        self,
        event: JobEvent,
        *,
        message: str = "",
        changes: Mapping[str, Any] | None = None,
        only_from: frozenset[JobStatus] | None = None,
    ) -> JobStatus | None:
        """Fire `event` as this worker; None if the job is no longer ours to settle."""
        try:
            record = self.queue.fire(
                self.job_id, event, source=SOURCE, message=message,
                worker_id=self.context.worker_id, changes=changes, only_from=only_from,
            )  # fmt: skip
        except (NotHoldingJob, TransitionNotAllowed, JobNotFound) as error:
            log.info("job %s: %s not applied: %s", self.job_id, event.value, error)
            self.lost = True
            return None
        return record.to_status


def _unusable_note(error: CheckpointError, kept_as: Path | None) -> str:
    what = (
        "the saved progress was made for other parameters"
        if isinstance(error, CheckpointMismatch)
        else "the saved progress was damaged"
    )
    kept = f"; kept as {kept_as.name}" if kept_as is not None else ""
    return f"{what}; started over from step 0 ({error}{kept})"
