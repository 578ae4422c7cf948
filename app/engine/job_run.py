"""One claimed job inside a worker: heartbeat, generate with a step checkpoint, settle.

The step checkpoint is where the app's requests take effect: it reads the job's status
(one small SELECT per step, cheap next to a denoising step) and stops on CANCELLING or
PAUSING. Settling is one transition: COMPLETE, FAIL or STOPPED, always with this worker's
id so a worker that lost its job (timed out, re-claimed elsewhere) can never settle it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.engine.generation.errors import CheckpointError, is_transient
from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    StepDecision,
    StepProgress,
)
from app.engine.graph import init_image_of
from app.engine.messages import MessageKind
from app.engine.queue import JobNotFound, NotHoldingJob, params_of
from app.engine.retry import describe_error, failure_message
from app.engine.states import JobEvent, JobStatus, TransitionNotAllowed
from app.models.tables import Job

if TYPE_CHECKING:
    from app.engine.worker import Worker

log = logging.getLogger(__name__)

SOURCE = "worker"
STOPPING = frozenset({JobStatus.CANCELLING, JobStatus.PAUSING})
DECISIONS = {JobStatus.CANCELLING: StepDecision.CANCEL, JobStatus.PAUSING: StepDecision.PAUSE}


class Heartbeat:
    """Beats from a thread while the job is held, so a long step never looks like a dead worker."""

    def __init__(self, beat: Callable[[], object], interval_s: float) -> None:
        self._beat = beat
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self._interval_s + 1.0)

    def _run(self) -> None:
        # A lost job (the beat finds it no longer ours) is noticed at the next step checkpoint.
        while not self._stop.wait(self._interval_s):
            try:
                self._beat()
            except Exception:  # a locked database for a moment is not a reason to die
                log.exception("heartbeat failed")


class JobRun:
    def __init__(self, worker: Worker, job: Job) -> None:
        self.worker = worker
        self.job = job
        self.job_id = job.id or 0
        self.params = params_of(job)
        config = worker.config
        self.output_path = Path(config.outputs_dir) / f"{self.job_id:06d}-{job.seed}.png"
        default_checkpoint = Path(config.checkpoints_dir) / f"job-{self.job_id}.ckpt"
        self.checkpoint_path = Path(job.checkpoint_path or default_checkpoint)
        self.lost = False
        self._last_row_update = 0.0
        self._last_sign_of_life = time.monotonic()

    def run(self) -> None:
        self.worker.send(MessageKind.STARTED, self.job_id, total=self.params.denoising_steps)
        with Heartbeat(self._heartbeat, self.worker.config.heartbeat_interval_s):
            try:
                outcome = self._generate()
            except Exception as error:
                log.warning("job %s failed: %s", self.job_id, describe_error(error))
                self._fail(error)
                return
        self._settle(outcome)

    def _heartbeat(self) -> bool:
        silent_s = time.monotonic() - self._last_sign_of_life
        if silent_s > self.worker.config.stall_limit_s:
            # Hung outside the step loop: let the heartbeat go stale so the watchdog acts.
            log.warning("job %s: no step for %.0fs; heartbeat withheld", self.job_id, silent_s)
            return False
        return self.worker.queue.heartbeat(self.job_id, self.worker.worker_id)

    def _generate(self) -> GenerationOutcome:
        try:
            return self._run_runner()
        except CheckpointError as error:
            # Same seed, same image: starting over costs time but never changes the result.
            log.warning("job %s: discarding its checkpoint: %s", self.job_id, error)
            self.checkpoint_path.unlink(missing_ok=True)
            return self._run_runner()

    def _run_runner(self) -> GenerationOutcome:
        return self.worker.runner.run(
            self.params,
            output_path=self.output_path,
            checkpoint_path=self.checkpoint_path,
            on_step=self.on_step,
            init_image=init_image_of(self.worker.queue, self.job),
        )

    # --- the step checkpoint -----------------------------------------------------------------

    def on_step(self, progress: StepProgress) -> StepDecision:
        self._last_sign_of_life = time.monotonic()
        self._report(progress)
        status = self._current_status()
        if status is None:
            self.lost = True
            return StepDecision.CANCEL  # someone else owns the job now: write nothing
        if status is JobStatus.PROCESSING and self.worker.pause_requested:
            status = self._pause_for_shutdown()
        return DECISIONS.get(status, StepDecision.CONTINUE)

    def _current_status(self) -> JobStatus | None:
        """The job's status if this worker still holds it, else None."""
        try:
            job = self.worker.queue.get(self.job_id)
        except JobNotFound:
            return None
        status = JobStatus(job.status)
        if job.worker_id != self.worker.worker_id or not status.is_running:
            return None
        return status

    def _pause_for_shutdown(self) -> JobStatus:
        record = self._fire(JobEvent.PAUSE, message="the worker is stopping")
        return record if record is not None else JobStatus.PROCESSING

    def _report(self, progress: StepProgress) -> None:
        worker = self.worker
        worker.send(
            MessageKind.PROGRESS, self.job_id, step=progress.step, total=progress.total,
            elapsed_s=progress.elapsed_s, preview_png=progress.preview_png,
        )  # fmt: skip
        now = time.monotonic()
        due = now - self._last_row_update >= worker.config.progress_interval_s
        if due or progress.step >= progress.total:
            self._last_row_update = now
            worker.queue.report_progress(
                self.job_id, worker.worker_id, progress.step, progress.total
            )

    # --- settling ----------------------------------------------------------------------------

    def _settle(self, outcome: GenerationOutcome) -> None:
        if outcome.kind is OutcomeKind.COMPLETED:
            path = str(outcome.image_path or self.output_path)
            changes = {
                "output_path": path,
                "error": None,
                "progress_step": self.params.denoising_steps,
            }
            if self._fire(JobEvent.COMPLETE, message=f"wrote {path}", changes=changes):
                self.worker.send(MessageKind.FINISHED, self.job_id, image_path=path)
            return
        if self.lost:
            log.info("job %s was taken from this worker; dropped its run", self.job_id)
            return
        changes = {}
        if outcome.kind is OutcomeKind.PAUSED and outcome.checkpoint_path is not None:
            changes["checkpoint_path"] = str(outcome.checkpoint_path)
        if self._fire(JobEvent.STOPPED, changes=changes, only_from=STOPPING):
            self.worker.send(MessageKind.FINISHED, self.job_id)

    def _fail(self, error: Exception) -> None:
        message = failure_message(error, transient=is_transient(error))
        if self._fire(JobEvent.FAIL, message=message, changes={"error": describe_error(error)}):
            self.worker.send(MessageKind.FINISHED, self.job_id, error=describe_error(error))

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
            record = self.worker.queue.fire(
                self.job_id, event, source=SOURCE, message=message,
                worker_id=self.worker.worker_id, changes=changes, only_from=only_from,
            )  # fmt: skip
        except (NotHoldingJob, TransitionNotAllowed, JobNotFound) as error:
            log.info("job %s: %s not applied: %s", self.job_id, event.value, error)
            self.lost = True
            return None
        return record.to_status
