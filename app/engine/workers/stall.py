"""When a running job counts as stuck: a hang, told from a slow step by what the worker does.

A worker's heartbeat comes from a thread, so it outlives a main thread stuck in a step (a
driver call that never returns). The heartbeat thread samples what the process does at each
tick and asks `StallRule.verdict`. Silence alone is no hang: a busy machine (a game on the
same GPU, a compile on the CPU, a driver spilling VRAM into system memory) makes steps ten
to fifty times slower with nothing stuck. So, between steps:

- A job is stuck once no step finished AND the worker's step threads used no CPU time
  (`CpuWatch`) for the quiet limit: max(the floor, `STEPS_ALLOWED` x the slowest of its last
  `RECENT_STEPS` steps; before two steps, the shorter of the ETA's learned step time and the
  first step's time with the loading), times up to `MAX_LOAD_STRETCH` when the machine's
  load rose since the run began (`LoadWatch`: a swap storm keeps a step off the CPU and
  shows in the load).
  The floor fits the device: two beats and at least `MIN_STALL_S` on the CPU, `GPU_FLOOR_S`
  on a GPU (a GPU step waits off the CPU, and on a spilled GPU one can take a minute). A
  hung step (asleep, or waiting on a dead driver call) is so settled within the quiet limit
  + one heartbeat interval + `CPU_SAMPLE_SPACING_S` (the quiet time is read off samples
  that far apart).
- A worker whose CPU time still advances is computing, however slowly: it is stuck only
  past the busy ceiling, max(the `stall_limit_s` setting, `BUSY_STEPS_ALLOWED` x its slowest
  recent step). A step spinning forever in a loop is caught there.
- Before the first step (loading a model, reading a checkpoint) and after the last one
  (decoding the image), the limit is the `stall_limit_s` setting (or the steps' allowance,
  if that is longer).

Time the heartbeat thread itself could not run (the process stopped by SIGSTOP, a suspended
machine, a starved CPU) is no evidence of anything: `StepTimer.excuse` and `CpuWatch` leave
it out. The verdict is a sentence for the job's timeline ("no step finished for 12 s and
the worker used no CPU time for 10 s; its slowest recent step took 0.9 s (limit 2.7 s)"),
so the user reads why the job was judged stuck, not a heartbeat gap.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from app.engine.history.eta import Estimator, device_of, learned
from app.engine.jobs.queue import JobQueue
from app.errors import DatabaseError
from app.models.tables import Job

log = logging.getLogger(__name__)

# With no CPU used, a step may take this many times the slowest recent one before it is stuck.
STEPS_ALLOWED = 3.0
RECENT_STEPS = 8  # "recent": the last this many steps of the run
MIN_STALL_S = 1.0  # and never less than this, whatever the steps and heartbeats say
GPU_FLOOR_S = 90.0  # on a GPU: a step on a spilled GPU waits about a minute off the CPU
# While the worker computes, a step may take this many times the slowest recent one (or the
# setting, if longer) before it is stuck: a loop that never ends, not a slow machine.
BUSY_STEPS_ALLOWED = 100.0
MAX_LOAD_STRETCH = 2.0  # the quiet limit grows with the machine's load by at most this
# CPU time the worker's other threads (progress messages, a database watch) may use while
# its step is asleep: this much, plus this share of the time watched. A worker cut to an
# eighth of a core still uses six times that share.
CPU_NOISE_S = 0.01
CPU_NOISE_SHARE = 0.02
LATE_TICK_S = 0.1  # a tick this late (or one interval, if longer) is the process kept off
CPU_SAMPLE_SPACING_S = 0.25  # older samples are kept this far apart (the newest is always now)
CPU_SAMPLES = 4096  # ... this many: over 15 minutes of history at that spacing
RELEARN_EVERY_S = 300.0  # the ETA's run times are read again this often (a claim stays cheap)


class Phase(Enum):
    LOADING = "loading"  # claimed, no step yet: loading the model, reading a checkpoint
    STEPPING = "stepping"  # inside the denoising loop
    DECODING = "decoding"  # after the last step: decoding and writing the image


class StepTimer:
    """When this run's steps finished (monotonic seconds), and how long the recent ones took.

    Written by the step loop, read by the heartbeat thread (a float and a bounded deque whose
    appends are atomic: no lock needed).
    """

    def __init__(self, started_at: float) -> None:
        self.last_sign_at = started_at  # the claim, then the newest step
        self.first_step_s: float | None = None  # from the claim, so with the loading
        self._steps = 0  # steps seen by this run (a resumed run starts past step 0)
        self._recent: deque[float] = deque(maxlen=RECENT_STEPS)  # their durations, seconds
        self._at_last_step = False

    def record(self, now: float, step: int, total: int) -> None:
        if self._steps > 0:  # the first step also carries the loading: not a step's time
            self._recent.append(now - self.last_sign_at)
        else:
            self.first_step_s = now - self.last_sign_at
        self._steps += 1
        self.last_sign_at = now
        self._at_last_step = step >= total

    def excuse(self, gap_s: float) -> None:
        """The whole process was stopped for `gap_s` (SIGSTOP, a suspended machine): the
        step loop could not run either, so that time is nobody's stall (nor a step's time)."""
        self.last_sign_at += gap_s

    @property
    def phase(self) -> Phase:
        if self._steps == 0:
            return Phase.LOADING
        return Phase.DECODING if self._at_last_step else Phase.STEPPING

    @property
    def slowest_step_s(self) -> float | None:
        """The longest of this run's last `RECENT_STEPS` steps; None before two steps."""
        return max(self._recent, default=None)


def other_threads_cpu_s() -> float:
    """CPU seconds this process used outside the calling thread (the heartbeat thread):
    the step loop and whatever it started (torch's thread pool, a driver's threads). The
    process's own clocks: exact, and alike on Linux, macOS and Windows."""
    return time.process_time() - time.thread_time()


class CpuWatch:
    """How long the worker's step has used no CPU time, from samples the heartbeat thread
    takes at each tick (`sample`) on a clock that only runs while that thread was watching:
    a tick later than `LATE_TICK_S` (or one interval) past due (the process stopped, or
    starved of CPU) adds no more than that, so contention never reads as a silent step."""

    def __init__(self, tick_s: float, cpu_s: Callable[[], float] = other_threads_cpu_s) -> None:
        self._tick_s = tick_s
        self._cpu_s = cpu_s
        self._watched_s = 0.0
        self._last_at: float | None = None
        self._samples: deque[tuple[float, float]] = deque(maxlen=CPU_SAMPLES)  # (watched, cpu)

    def sample(self, now: float) -> None:
        if self._last_at is not None:
            most_s = self._tick_s + max(self._tick_s, LATE_TICK_S)
            self._watched_s += min(max(0.0, now - self._last_at), most_s)
        self._last_at = now
        newest = (self._watched_s, self._cpu_s())
        samples = self._samples
        if len(samples) >= 2 and samples[-1][0] - samples[-2][0] < CPU_SAMPLE_SPACING_S:
            samples[-1] = newest  # keep older samples apart: the history covers minutes
        else:
            samples.append(newest)

    def quiet_s(self) -> float:
        """Seconds watched, back from the newest sample, in which the CPU time advanced by
        no more than the other threads' noise (`CPU_NOISE_S`, `CPU_NOISE_SHARE`)."""
        if not self._samples:
            return 0.0
        newest_at, newest_cpu = self._samples[-1]
        quiet = 0.0
        for at, cpu in reversed(self._samples):
            span = newest_at - at
            if newest_cpu - cpu > CPU_NOISE_S + CPU_NOISE_SHARE * span:
                break
            quiet = span
        return quiet


def load_per_core() -> float | None:
    """The machine's 1-minute load average per core; None where the system has none
    (Windows)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    return load / (os.cpu_count() or 1)


class LoadWatch:
    """How much busier the machine is than when the run began: the steps timed then ran at
    that load, so a rise past one runnable process per core may slow them by as much."""

    def __init__(self, load: Callable[[], float | None] = load_per_core) -> None:
        self._load = load
        self._at_start = load()

    def stretch(self) -> float:
        """1 (no rise, or no load to read) up to `MAX_LOAD_STRETCH`."""
        now = self._load()
        if now is None or self._at_start is None:
            return 1.0
        return min(MAX_LOAD_STRETCH, max(1.0, now / max(self._at_start, 1.0)))


def device_floor_s(device: str | None, beats_floor_s: float) -> float:
    """The least time a step is ever called stuck in: `beats_floor_s` on the CPU (or a fake
    runner's no device), `GPU_FLOOR_S` on an accelerator ("cuda", "cuda:1", "mps")."""
    if device is None or device == "cpu":
        return max(beats_floor_s, MIN_STALL_S)
    return max(beats_floor_s, GPU_FLOOR_S)


@dataclass(frozen=True)
class StallRule:
    limit_s: float  # the setting: outside the step loop, or while a step's time is unknown
    floor_s: float = MIN_STALL_S  # never call a step stuck sooner than this
    expected_step_s: float | None = None  # from the ETA; None: nothing learned yet

    def verdict(
        self, timer: StepTimer, now: float, *, cpu_quiet_s: float, load_stretch: float = 1.0
    ) -> str | None:
        """Why the run is stuck, in words for the timeline; None while it is not.
        `cpu_quiet_s`: how long its step threads used no CPU time (`CpuWatch.quiet_s`);
        `load_stretch`: how much the machine's load rose since the run began (`LoadWatch`)."""
        silent_s = now - timer.last_sign_at
        step_s = self._step_s(timer)
        allowance_s = STEPS_ALLOWED * step_s if step_s else 0.0
        phase = timer.phase
        stepping = phase is Phase.STEPPING and step_s is not None
        if stepping:
            quiet_limit_s = max(self.floor_s, allowance_s) * max(1.0, load_stretch)
        else:
            quiet_limit_s = max(self.limit_s, allowance_s)
        busy_limit_s = max(self.limit_s, BUSY_STEPS_ALLOWED * (step_s or 0.0), quiet_limit_s)
        quiet = cpu_quiet_s > quiet_limit_s
        if silent_s <= (quiet_limit_s if quiet else busy_limit_s):
            return None
        limit_s = quiet_limit_s if quiet else busy_limit_s
        doing = f"the worker used no CPU time for {_s(cpu_quiet_s)} s" if quiet else ""
        if stepping:
            stretched = ", stretched for the machine's load" if quiet and load_stretch > 1 else ""
            return (
                f"no step finished for {_s(silent_s)} s"
                f"{f' and {doing}' if quiet else ' though the worker kept computing'}; "
                f"{self._step_words(timer)} (limit {_s(limit_s)} s{stretched})"
            )
        return f"{_silence_words(phase, silent_s)} (limit {_s(limit_s)} s); " + (
            doing or "the worker kept computing"
        )

    def _step_s(self, timer: StepTimer) -> float | None:
        """How long a step may take: the slowest recent one; before two steps, the shorter
        of the ETA's (loading and decoding spread over the steps) and the first step's (with
        the loading): both are longer than a step, so the shorter is the truer."""
        if timer.slowest_step_s:
            return timer.slowest_step_s
        known = [s for s in (self.expected_step_s, timer.first_step_s) if s]
        return min(known, default=None)

    def _step_words(self, timer: StepTimer) -> str:
        """What the limit was judged against, as the verdict says it."""
        if timer.slowest_step_s:
            return f"its slowest recent step took {_s(timer.slowest_step_s)} s"
        if self.expected_step_s and self._step_s(timer) == self.expected_step_s:
            return f"a step should take about {_s(self.expected_step_s)} s"
        return f"its first step took {_s(timer.first_step_s or 0.0)} s with the loading"


def _silence_words(phase: Phase, silent_s: float) -> str:
    if phase is Phase.LOADING:
        return f"no step finished {_s(silent_s)} s after the claim"
    if phase is Phase.DECODING:
        return f"the image was not written {_s(silent_s)} s after the last step"
    return f"no step finished for {_s(silent_s)} s"


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
