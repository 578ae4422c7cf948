"""When a running job counts as stuck: judged against how long one of its steps takes.

A worker's heartbeat comes from a thread, so it outlives a main thread stuck in a step (a
driver call that never returns). The heartbeat thread asks `StallRule.verdict` instead:

- Between steps, a job is stuck once no step finished for `STEPS_ALLOWED` times the time a
  step takes: the steps this run has already made say so, else the ETA's learned run times
  (`history.eta`), never sooner than `floor_s` (a beat's jitter is not a stall).
- Before the first step (loading a model, reading a checkpoint) and after the last one
  (decoding the image), or while nothing says how long a step takes, the limit is the
  `stall_limit_s` setting (or the steps' allowance, if that is longer).

The verdict is a sentence for the job's timeline ("no step finished for 42 s; a step takes
about 2 s"), so the user reads what happened, not a heartbeat gap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from app.engine.history.eta import Estimator, device_of, learned
from app.engine.jobs.queue import JobQueue
from app.errors import DatabaseError
from app.models.tables import Job

log = logging.getLogger(__name__)

STEPS_ALLOWED = 3.0  # a step may take this many times its usual time before it is stuck
MIN_STALL_S = 1.0  # and never less than this, whatever the steps and heartbeats say
RELEARN_EVERY_S = 300.0  # the ETA's run times are read again this often (a claim stays cheap)


class Phase(Enum):
    LOADING = "loading"  # claimed, no step yet: loading the model, reading a checkpoint
    STEPPING = "stepping"  # inside the denoising loop
    DECODING = "decoding"  # after the last step: decoding and writing the image


class StepTimer:
    """When this run's steps finished (monotonic seconds): how long a step takes here.

    Written by the step loop, read by the heartbeat thread (plain floats: no lock needed).
    """

    def __init__(self, started_at: float) -> None:
        self.last_sign_at = started_at  # the claim, then the newest step
        self._first_step_at: float | None = None
        self._steps = 0  # steps seen by this run (a resumed run starts past step 0)
        self._at_last_step = False

    def record(self, now: float, step: int, total: int) -> None:
        if self._first_step_at is None:
            self._first_step_at = now
        self._steps += 1
        self.last_sign_at = now
        self._at_last_step = step >= total

    def excuse(self, gap_s: float) -> None:
        """The whole process was stopped for `gap_s` (SIGSTOP, a suspended machine): the
        step loop could not run either, so that time is nobody's stall."""
        self.last_sign_at += gap_s
        if self._first_step_at is not None:
            self._first_step_at += gap_s

    @property
    def phase(self) -> Phase:
        if self._steps == 0:
            return Phase.LOADING
        return Phase.DECODING if self._at_last_step else Phase.STEPPING

    @property
    def step_s(self) -> float | None:
        """The mean time of a step in this run; None before two steps (the first one also
        carries the loading)."""
        if self._first_step_at is None or self._steps < 2:
            return None
        return (self.last_sign_at - self._first_step_at) / (self._steps - 1)


@dataclass(frozen=True)
class StallRule:
    limit_s: float  # the setting: outside the step loop, or while a step's time is unknown
    floor_s: float = MIN_STALL_S  # never call a step stuck sooner than this
    expected_step_s: float | None = None  # from the ETA; None: nothing learned yet

    def verdict(self, timer: StepTimer, now: float) -> str | None:
        """Why the run is stuck, in words for the timeline; None while it is not."""
        silent_s = now - timer.last_sign_at
        step_s = timer.step_s or self.expected_step_s
        allowance_s = STEPS_ALLOWED * step_s if step_s else 0.0
        phase = timer.phase
        if phase is Phase.STEPPING and step_s:
            if silent_s <= max(self.floor_s, allowance_s):
                return None
            return f"no step finished for {_s(silent_s)} s; a step takes about {_s(step_s)} s"
        limit_s = max(self.limit_s, allowance_s)
        if silent_s <= limit_s:
            return None
        if phase is Phase.LOADING:
            return f"no step finished {_s(silent_s)} s after the claim (limit {_s(limit_s)} s)"
        if phase is Phase.DECODING:
            return (
                f"the image was not written {_s(silent_s)} s after the last step "
                f"(limit {_s(limit_s)} s)"
            )
        return f"no step finished for {_s(silent_s)} s (limit {_s(limit_s)} s)"


def _s(seconds: float) -> str:
    """42, 2.4, 0.05: as many digits as a person needs."""
    return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.2g}"


class ExpectedStepTimes:
    """The time a job's step should take, from the ETA's learned run times (`history.eta`),
    read again every `relearn_every_s` so that a claim never pays for the whole history."""

    def __init__(
        self,
        queue: JobQueue,
        *,
        relearn_every_s: float = RELEARN_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._queue = queue
        self._relearn_every_s = relearn_every_s
        self._clock = clock
        self._estimator: Estimator | None = None
        self._learned_at = 0.0

    def for_job(self, job: Job, worker_id: str, steps: int) -> float | None:
        """Seconds per step of `job` (`steps`: the steps it denoises), or None if unknown."""
        estimator = self._current()
        if estimator is None or steps <= 0:
            return None
        whole = estimator.estimate(job.model, job.width, job.height, job.steps,
                                   device_of(worker_id))  # fmt: skip
        # Loading and decoding are in the learned time too: a generous step, never a short one.
        return None if whole is None else whole / steps

    def _current(self) -> Estimator | None:
        now = self._clock()
        stale = now - self._learned_at >= self._relearn_every_s
        # While nothing was learned at all (a new queue), the first finished job may teach.
        knows_nothing = self._estimator is None or self._estimator.per_work.median(None) is None
        if stale or knows_nothing:
            try:
                self._estimator = learned(self._queue)
            except DatabaseError as error:  # no estimate this time: the setting's limit holds
                log.warning("could not read the learned run times: %s", error)
            self._learned_at = now
        return self._estimator
