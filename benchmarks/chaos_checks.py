"""The checks behind `benchmarks/chaos.py`'s reliability figures, apart so tests can fail them.

Each check reads only what it is given (jobs, their timelines, the workers' ledger), so a
test can hand it a bad timeline or a bad ledger and see it count the fault.

    lost          a job missing, not matching its own history, or SUCCESS without its image
    double_runs   a job two workers were running at the same time (from the ledger), or
                  completed twice (from its timeline)
    illegal_paths a timeline that is not a chain of transitions the table allows
    stuck         a job that is not finished, cancelled or given up after the drain (a
                  BLOCKED child of a given-up parent is settled: it waits for a user)
    unrecorded    a SUCCESS job with no completed run in the ledger: the ledger missed work,
                  so `double_runs` could not have seen it either
    garbage_images  a SUCCESS image all one colour, or (after an interruption) not the
                  image of an uninterrupted run of the same job
    steps_lost_p95  steps done again after a worker was killed (95th percentile)
    steps_per_checkpoint_interval  the steps one rolling-checkpoint interval holds at the
                  run's pace (median step time): steps_lost_p95's goal is at most this
    seconds_lost_p95  the work lost per kill in seconds (goal: at most the interval), which
                  does not depend on how fast the steps ran when the worker was killed
    resumed_after_crash_max_diff  the largest pixel difference between a job that lost its
                  worker and then succeeded and an uninterrupted run of it (goal 0)

Figures of issue 21 (clock skew, stalls, outages, replaced database files), from the
ledger's own marks: its times are the true clock in every worker, a run that found its job
taken ends with `end-lost` (its worker was alive), a killed one ends silent.

    healthy_jobs_timed_out  jobs with more TIMEOUTs than their runs earned (a run earns
                  one by going silent: killed; by a silence as long as the heartbeat
                  timeout less one beat while the store was up: frozen; by a stall; or
                  by its worker killed by the driver after its end, before its SUCCESS
                  was written): the watchdog judged a live, steady worker dead
    attempts_burned_by_outage  such TIMEOUTs of jobs that ran through a store outage
                  (the PostgreSQL server down, SQLite's write lock held, the disk full):
                  attempts spent on heartbeats stale only because nobody could write them
    overwritten_images  output files completed by runs of two different jobs (jobs with
                  one id in two databases differ in the ledger's job key)
    stall_detected_s  the longest time from a stalled step to its worker's "stuck" verdict
                  or the job's first transition by anyone else (a stall never noticed counts
                  its whole length)
    stalls_late   stalls noticed later than 3 x the run's step time + the heartbeat
                  timeout, or never (goal 0)
    stalls_unmeasured  stalls whose database file was replaced (replace-db) before they
                  were noticed: the restored copy lost that time's rows, so the history
                  cannot time them (left out of the two figures above)

Figures of issue 41 (a busy machine is not a broken one):

    healthy_jobs_called_stuck  jobs whose worker judged them stuck ("stuck: ..." in the
                  history) though no stall or hang was planted in any of their runs (goal 0)
    hang_detected_s  the longest time from a planted hang (the contention fault's stalled
                  step) to its worker's "stuck" verdict (a hang never judged counts its
                  whole length)
    hang_bound_s  the tightest bound those verdicts stated: their limit + one heartbeat
                  interval + the CPU samples' spacing, 0.25 s (`app.engine.workers.stall`)
    hangs_late    planted hangs judged later than their bound, or never (goal 0)
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import cast

from PIL import Image, ImageChops, UnidentifiedImageError

from app.engine.jobs.queue import params_of
from app.engine.jobs.retry import is_settled
from app.engine.jobs.states import TRANSITIONS, JobEvent, JobStatus
from app.engine.workers.stall import CPU_SAMPLE_SPACING_S
from app.models.tables import Job, JobTransition
from app.testing.ledger import LedgerEntry, Mark, job_key

# The figures that must all be 0 for a chaos run to pass.
FAULT_FIGURES = (
    "lost", "double_runs", "illegal_paths", "stuck", "unrecorded", "garbage_images",
    "resumed_after_crash_max_diff", "orphaned_children", "healthy_jobs_timed_out",
    "attempts_burned_by_outage", "overwritten_images", "stalls_late",
    "healthy_jobs_called_stuck", "hangs_late",
)  # fmt: skip
WORKER_SOURCE = "worker"  # the history's source of a worker's own transitions
STALL_STEPS = 3  # a stall is noticed in time within this many step times + the timeout
# How a job's history may begin: on its own, or after parent jobs (BLOCKED).
FIRST_EVENTS = frozenset({JobEvent.SUBMIT, JobEvent.SUBMIT_AFTER})

Parents = Mapping[int, Sequence[int]]  # job id -> the ids of its parent jobs
Window = tuple[float, float]  # (from, to) on the true clock: a store outage


Reference = Callable[[Job], Path]  # the image of an uninterrupted run of the same job


class EmptyLedger(Exception):
    """The workers recorded nothing: `double_runs: 0` would be a claim nobody checked."""

    def __init__(self, ledger: Path) -> None:
        super().__init__(
            f"The ledger {ledger} recorded no runs, so double runs could not be checked: "
            "the workers did not use the ledger runner, or could not write to it."
        )


def legal(timeline: Sequence[JobTransition]) -> bool:
    """The timeline starts with SUBMIT (or SUBMIT_AFTER) and every row is a transition the
    table allows."""
    if not timeline or timeline[0].from_status is not None:
        return False
    if timeline[0].event not in FIRST_EVENTS:
        return False
    if TRANSITIONS.get((None, JobEvent(timeline[0].event))) != timeline[0].to_status:
        return False
    for previous, row in pairwise(timeline):
        source = JobStatus(row.from_status) if row.from_status else None
        if row.from_status != previous.to_status:
            return False  # a jump: the row does not start where the previous one ended
        if TRANSITIONS.get((source, JobEvent(row.event))) != row.to_status:
            return False
    return True


def is_lost(job: Job | None, timeline: Sequence[JobTransition]) -> bool:
    """Missing, its status not where its history ends, or SUCCESS without the image file."""
    if job is None or not timeline or timeline[-1].to_status != job.status:
        return True
    return job.status == JobStatus.SUCCESS and not Path(job.output_path or "").is_file()


def is_stuck(job: Job, jobs: Mapping[int, Job], parents: Parents) -> bool:
    """Something would still happen to it: it is neither finished, cancelled nor given up.

    A BLOCKED child waits for its parents: it is settled when one of them will never
    succeed unless a user acts (given up, or itself such a child), as the graph leaves it
    BLOCKED with a reason by design. A cancelled parent does not settle it: the graph
    cancels the child (at once, or by reconciliation), so until then it is stuck.
    """
    if job.status == JobStatus.BLOCKED:
        return not any(
            _waits_for_a_user(jobs[parent], jobs, parents)
            for parent in parents.get(job.id or 0, ())
            if parent in jobs
        )
    return not is_settled(job)


def _waits_for_a_user(parent: Job, jobs: Mapping[int, Job], parents: Parents) -> bool:
    if parent.status == JobStatus.BLOCKED:
        return not is_stuck(parent, jobs, parents)
    return parent.status in (JobStatus.FAILED, JobStatus.TIMEOUT) and is_settled(parent)


def completed_twice(timeline: Sequence[JobTransition]) -> bool:
    return sum(row.event == JobEvent.COMPLETE for row in timeline) > 1


def overlapping_runs(ledger: Iterable[LedgerEntry]) -> set[int]:
    """Jobs with two runs whose [first, last] ledger times overlap.

    Runs of one id but different job keys are runs of two jobs (the database was replaced
    and ids started again): that is `overwritten_images`' business, not a double run."""
    entries = list(ledger)
    keys = {(e.job, e.run): e.key for e in entries if e.what is Mark.START}
    spans: dict[tuple[int, str], list[float]] = defaultdict(list)
    for entry in entries:
        spans[(entry.job, entry.run)].append(entry.at)
    by_job: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for (job, run), times in spans.items():
        by_job[(job, keys.get((job, run), ""))].append((min(times), max(times)))
    return {
        job
        for (job, _key), runs in by_job.items()
        if any(earlier[1] > later[0] for earlier, later in pairwise(sorted(runs)))
    }


def unrecorded_successes(jobs: Iterable[Job], ledger: Iterable[LedgerEntry]) -> set[int]:
    completed = {entry.job for entry in ledger if entry.what is Mark.COMPLETED}
    return {job.id or 0 for job in jobs if job.status == JobStatus.SUCCESS} - completed


def figures(
    submitted: Sequence[int],
    jobs: Mapping[int, Job],
    timelines: Mapping[int, Sequence[JobTransition]],
    ledger: Sequence[LedgerEntry],
    ledger_path: Path,
    reference: Reference,
    parents: Parents,
    checkpoint_interval_s: float = 1.0,
    timing: Timing | None = None,
) -> dict[str, float]:
    """The chaos run's figures; `EmptyLedger` when the ledger holds nothing to check against.

    `orphaned_children` is the graph's own count (`app.engine.jobs.graph.orphaned_children`),
    read from the database by the caller."""
    if not ledger:
        raise EmptyLedger(ledger_path)
    lost = illegal = 0
    twice: set[int] = set()
    for job_id in submitted:
        timeline = timelines.get(job_id, [])
        lost += is_lost(jobs.get(job_id), timeline)
        illegal += not legal(timeline)
        if completed_twice(timeline):
            twice.add(job_id)
    statuses = [JobStatus(job.status) for job in jobs.values()]
    diffs = resumed_after_crash_diffs(jobs.values(), timelines, reference)
    return {
        "jobs": len(jobs),
        "lost": lost,
        "double_runs": len(overlapping_runs(ledger) | twice),
        "illegal_paths": illegal,
        "stuck": sum(is_stuck(job, jobs, parents) for job in jobs.values()),
        "blocked": statuses.count(JobStatus.BLOCKED),
        "unrecorded": len(unrecorded_successes(jobs.values(), ledger)),
        "success": statuses.count(JobStatus.SUCCESS),
        "cancelled": statuses.count(JobStatus.CANCELLED),
        "given_up": statuses.count(JobStatus.FAILED) + statuses.count(JobStatus.TIMEOUT),
        "ledger_runs": len({(entry.job, entry.run) for entry in ledger}),
        "garbage_images": len(garbage_images(jobs.values(), timelines, reference)),
        "steps_lost_p95": round(percentile(steps_lost_per_kill(ledger), 95)),
        "steps_per_checkpoint_interval": steps_per_interval(ledger, checkpoint_interval_s),
        "seconds_lost_p95": round(percentile(seconds_lost_per_kill(ledger), 95), 2),
        "resumed_after_crash_max_diff": max(diffs, default=0),
        "resumed_after_crash_jobs": len(diffs),
    } | fault_figures(jobs, timelines, ledger, timing or Timing())


# --- figures of issues 10 and 11: lost steps and images -------------------------------------


def percentile(values: Sequence[float], percent: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def steps_lost_per_kill(ledger: Iterable[LedgerEntry]) -> list[int]:
    """For each run that ended without an end mark (killed) and was run again: the steps
    the next run did again, i.e. how far the killed run got past where the next one began."""
    return [len(again) for again, _ in _work_lost_per_kill(ledger)]


def seconds_lost_per_kill(ledger: Iterable[LedgerEntry]) -> list[float]:
    """The same kills in time: from the killed run's step the next run resumed after (or
    from the killed run's start, when it began there) to the killed run's last step."""
    return [
        again[-1].at - since.at if again else 0.0 for again, since in _work_lost_per_kill(ledger)
    ]


def _work_lost_per_kill(
    ledger: Iterable[LedgerEntry],
) -> list[tuple[list[LedgerEntry], LedgerEntry]]:
    """Per kill: the killed run's steps that the next run did again, and the mark the lost
    work began at (the step the next run resumed after, else the killed run's first mark)."""
    runs: dict[int, dict[str, list[LedgerEntry]]] = defaultdict(lambda: defaultdict(list))
    for entry in ledger:
        runs[entry.job][entry.run].append(entry)
    lost = []
    for by_run in runs.values():
        ordered = sorted(by_run.values(), key=lambda entries: min(e.at for e in entries))
        for killed, following in pairwise(ordered):
            done = [e for e in killed if e.what is Mark.STEP]
            redone = [e.step for e in following if e.what is Mark.STEP]
            ended = any(e.what not in (Mark.START, Mark.STEP) for e in killed)
            if done and redone and not ended:
                resumed_after = min(redone) - 1
                again = sorted((e for e in done if e.step > resumed_after), key=lambda e: e.at)
                saved = [e for e in done if e.step == resumed_after]
                since = saved[0] if saved else min(killed, key=lambda e: e.at)
                lost.append((again, since))
    return lost


def steps_per_interval(ledger: Iterable[LedgerEntry], interval_s: float) -> int:
    """The steps one checkpoint interval holds: `interval_s` over the median time between
    two consecutive steps of one run (0 when no run did two steps)."""
    steps: dict[tuple[int, str], list[float]] = defaultdict(list)
    for entry in ledger:
        if entry.what is Mark.STEP:
            steps[(entry.job, entry.run)].append(entry.at)
    gaps = [
        later - earlier for times in steps.values() for earlier, later in pairwise(sorted(times))
    ]
    return round(interval_s / statistics.median(gaps)) if gaps else 0


def rgb_extrema(image: Image.Image) -> tuple[tuple[int, int], ...]:
    """(lowest, highest) of each of R, G and B."""
    # Typed as a union over image modes; in RGB mode it is one pair per band.
    return cast("tuple[tuple[int, int], ...]", image.convert("RGB").getextrema())


def is_one_colour(image: Path) -> bool:
    """Every pixel the same (what a NaN latent decodes to); False for a file that is no image."""
    try:
        with Image.open(image) as opened:
            extrema = rgb_extrema(opened)
    except (OSError, UnidentifiedImageError):
        return False
    return all(low == high for low, high in extrema)


def image_difference(image: Path, reference: Path) -> int:
    """The largest difference of one colour channel of one pixel (0..255).

    Files that are not images (the scripted runner's) are 0 when equal, else 255; so are
    images of different sizes.
    """
    if image.read_bytes() == reference.read_bytes():
        return 0
    try:
        with Image.open(image) as a, Image.open(reference) as b:
            if a.size != b.size:
                return 255
            difference = ImageChops.difference(a.convert("RGB"), b.convert("RGB"))
            return max(high for _low, high in rgb_extrema(difference))
    except (OSError, UnidentifiedImageError):
        return 255


def was_interrupted(timeline: Sequence[JobTransition]) -> bool:
    """Started more than once: paused and resumed, or lost and retried."""
    return sum(row.event == JobEvent.START for row in timeline) > 1


def was_lost_and_resumed(timeline: Sequence[JobTransition]) -> bool:
    """Its worker was lost (killed, frozen, gone at launch), and it then succeeded."""
    lost = any(row.event == JobEvent.TIMEOUT for row in timeline)
    return lost and bool(timeline) and timeline[-1].to_status == JobStatus.SUCCESS


def garbage_images(
    jobs: Iterable[Job], timelines: Mapping[int, Sequence[JobTransition]], reference: Reference
) -> set[int]:
    """SUCCESS jobs whose image is one colour, or, when interrupted, is not the uninterrupted
    run's image (uninterrupted jobs are compared only for colour: they are the reference)."""
    garbage = set()
    for job in jobs:
        if job.status != JobStatus.SUCCESS or job.id is None:
            continue
        image = Path(job.output_path or "")
        if not image.is_file():
            continue  # counted as lost
        interrupted = was_interrupted(timelines.get(job.id, []))
        if is_one_colour(image) or (interrupted and image_difference(image, reference(job))):
            garbage.add(job.id)
    return garbage


def resumed_after_crash_diffs(
    jobs: Iterable[Job], timelines: Mapping[int, Sequence[JobTransition]], reference: Reference
) -> list[int]:
    """`image_difference` against the reference, for every job lost, resumed and succeeded."""
    return [
        image_difference(Path(job.output_path or ""), reference(job))
        for job in jobs
        if job.id is not None
        and was_lost_and_resumed(timelines.get(job.id, []))
        and Path(job.output_path or "").is_file()
    ]


# --- figures of issue 21: skewed clocks, stalls, outages, replaced databases -----------------


@dataclass(frozen=True)
class Timing:
    """What the issue 21 figures judge against: the run's heartbeat settings, and when the
    store was out (windows on the true clock, as the fault driver recorded them)."""

    heartbeat_timeout_s: float = 3.0
    heartbeat_interval_s: float = 0.5
    outages: Sequence[Window] = ()
    # When the database file was replaced: a run then in progress held its job in a file
    # nobody sees any more, and the restored copy's TIMEOUT of it is right.
    replaced_at: Sequence[float] = ()
    planted: Sequence[int] = ()  # jobs the contention fault planted a hang on
    # The workers the driver SIGKILLed (`WorkerIdentity` strings): their jobs' TIMEOUTs are
    # earned even where the run had ended, its image written, an instant before the kill.
    killed_workers: frozenset[str] = frozenset()

    @property
    def silence_allowed_s(self) -> float:
        """A worker silent this long may be judged gone: its last beat, one interval before
        its silence began, is then as old as the timeout."""
        return self.heartbeat_timeout_s - self.heartbeat_interval_s


def fault_figures(
    jobs: Mapping[int, Job],
    timelines: Mapping[int, Sequence[JobTransition]],
    ledger: Sequence[LedgerEntry],
    timing: Timing,
) -> dict[str, float]:
    wrong = unearned_timeouts(jobs, timelines, ledger, timing)
    every_stall = stall_detections(
        ledger, timelines, timing.heartbeat_timeout_s, timing.replaced_at
    )
    stalls = [s for s in every_stall if s.measured]
    return {
        "healthy_jobs_timed_out": sum(not w.during_outage for w in wrong),
        "attempts_burned_by_outage": sum(w.count for w in wrong if w.during_outage),
        "overwritten_images": len(overwritten_images(ledger)),
        "stall_detected_s": round(max((s.detected_s for s in stalls), default=0.0), 2),
        "stall_goal_s": round(min((s.goal_s for s in stalls), default=0.0), 2),
        "stalls": len(stalls),
        "stalls_late": sum(s.late for s in stalls),
        "stalls_unmeasured": len(every_stall) - len(stalls),
    } | contention_figures(timelines, ledger, timing)


@dataclass(frozen=True)
class Run:
    """One run of the ledger: its marks in time order."""

    job: int
    marks: Sequence[LedgerEntry]

    @property
    def key(self) -> str:
        return next((m.key for m in self.marks if m.what is Mark.START), "")

    @property
    def image(self) -> str:
        return next((m.image for m in self.marks if m.what is Mark.START), "")

    @property
    def attempt(self) -> int:
        return next((m.attempt for m in self.marks if m.what is Mark.START), 0)

    @property
    def end(self) -> Mark | None:
        """How it ended (None: it went silent, killed)."""
        last = self.marks[-1].what
        return None if last in (Mark.START, Mark.STEP, Mark.STALLED) else last

    def stalled_at(self) -> float | None:
        return next((m.at for m in self.marks if m.what is Mark.STALLED), None)

    def overlaps(self, windows: Iterable[Window]) -> bool:
        """It ran during one of `windows` (or at a moment: a window from and to it)."""
        first, last = self.marks[0].at, self.marks[-1].at
        return any(start <= last and first <= end for start, end in windows)

    def longest_silence_s(self, outages: Iterable[Window] = ()) -> float:
        """The longest time between two marks, less the part of it the store was out."""
        windows = list(outages)
        return max(
            (later.at - earlier.at - _overlap(earlier.at, later.at, windows)
             for earlier, later in pairwise(self.marks)),
            default=0.0,
        )  # fmt: skip

    def step_time_s(self) -> float:
        """The median time between two steps of this run (0 with fewer than two)."""
        steps = [m.at for m in self.marks if m.what is Mark.STEP]
        gaps = [later - earlier for earlier, later in pairwise(steps)]
        return statistics.median(gaps) if gaps else 0.0


def _overlap(start: float, end: float, windows: Iterable[Window]) -> float:
    return sum(max(0.0, min(end, w_end) - max(start, w_start)) for w_start, w_end in windows)


def runs_of(ledger: Iterable[LedgerEntry]) -> list[Run]:
    marks: dict[tuple[int, str], list[LedgerEntry]] = defaultdict(list)
    for entry in ledger:
        marks[(entry.job, entry.run)].append(entry)
    return [Run(job, sorted(m, key=lambda e: e.at)) for (job, _run), m in marks.items()]


@dataclass(frozen=True)
class UnearnedTimeout:
    job: int
    count: int  # TIMEOUTs more than its runs earned
    during_outage: bool  # one of its runs ran while the store was out


def unearned_timeouts(
    jobs: Mapping[int, Job],
    timelines: Mapping[int, Sequence[JobTransition]],
    ledger: Iterable[LedgerEntry],
    timing: Timing,
) -> list[UnearnedTimeout]:
    """Jobs with attempts timed out more often than their runs earned (`earned_timeout`):
    the watchdog judged a worker gone that was alive and steady (a skewed clock, a store
    outage, a liveness check that looked in the wrong place). An attempt with no run in
    the ledger (its worker died between claim and start) is given the benefit of doubt."""
    runs = runs_by_job(ledger, jobs)
    unearned = []
    for job_id, timeline in timelines.items():
        its_runs = runs.get(job_id, [])
        count = 0
        for attempt, timeouts in _timeouts_by_attempt(timeline).items():
            of_attempt = [run for run in its_runs if run.attempt in (0, attempt)]
            earned = sum(
                earned_timeout(run, timing)
                or _silent_since_its_end(run, timeouts, timing)
                or _killed_after_its_end(run, timeouts, timing)
                for run in of_attempt
            )
            count += max(0, len(timeouts) - earned) if of_attempt else 0
        if count:
            unearned.append(UnearnedTimeout(job_id, count, _during_outage(
                its_runs, [row.at for row in timeline if row.event == JobEvent.TIMEOUT], timing
            )))  # fmt: skip
    return unearned


def _silent_since_its_end(run: Run, timeouts: Sequence[JobTransition], timing: Timing) -> bool:
    """The run ended (its image written, say) and its worker was killed before it settled:
    nothing was heard of the job for a heartbeat timeout before the TIMEOUT. A steady run
    whose job was taken while it still ran is not this (its end comes after the TIMEOUT)."""
    if run.end is None:
        return False
    ended_at = run.marks[-1].at
    return any(row.at - ended_at >= timing.silence_allowed_s for row in timeouts)


def _killed_after_its_end(run: Run, timeouts: Sequence[JobTransition], timing: Timing) -> bool:
    """The run ended and its worker, killed by the driver before the job's SUCCESS was
    written, was reported gone by its supervisor at once (the TIMEOUT names it): on a
    loaded machine the moment between the end and that write is long enough to be hit."""
    if run.end is None:
        return False
    ended_at = run.marks[-1].at
    return any(
        row.at >= ended_at and _names_a_killed_worker(row.message, timing) for row in timeouts
    )


def _names_a_killed_worker(message: str | None, timing: Timing) -> bool:
    words = (message or "").split()
    return any(worker in words for worker in timing.killed_workers)


def _timeouts_by_attempt(timeline: Sequence[JobTransition]) -> dict[int, list[JobTransition]]:
    by_attempt: dict[int, list[JobTransition]] = defaultdict(list)
    for row in timeline:
        if row.event == JobEvent.TIMEOUT:
            by_attempt[row.attempt].append(row)
    return by_attempt


def _during_outage(runs: Sequence[Run], timeouts_at: Sequence[float], timing: Timing) -> bool:
    """One of the job's runs ran while the store was out, or it was timed out within a
    heartbeat timeout or two after one (a claim made just before the store went away)."""
    late_s = 2 * timing.heartbeat_timeout_s
    return any(run.overlaps(timing.outages) for run in runs) or any(
        start <= at <= end + late_s for at in timeouts_at for start, end in timing.outages
    )


def earned_timeout(run: Run, timing: Timing) -> bool:
    """The run gave the watchdog reason to act: it went silent (killed), was silent longer
    than a heartbeat timeout allows while the store was up (frozen), stalled, or its
    database file was replaced under it."""
    return (
        run.end is None
        or run.stalled_at() is not None
        or run.longest_silence_s(timing.outages) >= timing.silence_allowed_s
        or run.overlaps((at, at) for at in timing.replaced_at)
    )


def runs_by_job(ledger: Iterable[LedgerEntry], jobs: Mapping[int, Job]) -> dict[int, list[Run]]:
    """Each job's runs: of its id and of its parameters (after a database was replaced,
    another job's runs may carry the same id). Runs without a key match by id alone."""
    keys = {job_id: job_key(params_of(job)) for job_id, job in jobs.items()}
    runs: dict[int, list[Run]] = defaultdict(list)
    for run in runs_of(ledger):
        if run.job in keys and run.key in ("", keys[run.job]):
            runs[run.job].append(run)
    return runs


def overwritten_images(ledger: Iterable[LedgerEntry]) -> set[str]:
    """Output file names that runs of two different jobs (job keys) completed."""
    writers: dict[str, set[str]] = defaultdict(set)
    for run in runs_of(ledger):
        if run.end is Mark.COMPLETED:
            writers[run.image].add(run.key)
    return {image for image, keys in writers.items() if len(keys) > 1}


@dataclass(frozen=True)
class StallDetection:
    job: int
    detected_s: float  # from the stalled step to the job's first transition not by its worker
    goal_s: float  # STALL_STEPS x the run's step time + the heartbeat timeout
    noticed: bool  # False: the stall ended (or the run did) before anybody acted
    measured: bool = True  # False: its database file was replaced meanwhile (no history)

    @property
    def late(self) -> bool:
        return self.measured and (not self.noticed or self.detected_s > self.goal_s)


def stall_detections(
    ledger: Iterable[LedgerEntry],
    timelines: Mapping[int, Sequence[JobTransition]],
    heartbeat_timeout_s: float,
    replaced_at: Sequence[float] = (),
) -> list[StallDetection]:
    """For each stalled run: how long until its worker judged it stuck ("stuck: ..."), or
    somebody else moved the job. A run whose database file was replaced after its stall
    and before that (`replaced_at`) is left out: the restored copy has no rows of that
    time, and its later ones are another story (`stalls_unmeasured` counts them)."""
    detections = []
    for run in runs_of(ledger):
        stalled = run.stalled_at()
        if stalled is None:
            continue
        goal = STALL_STEPS * run.step_time_s() + heartbeat_timeout_s
        acted = [
            row.at for row in timelines.get(run.job, [])
            if row.at >= stalled
            and (row.source != WORKER_SOURCE or row.message.startswith(STUCK_VERDICT))
        ]  # fmt: skip
        after = [m.at for m in run.marks if m.at > stalled]
        if acted and (not after or min(acted) <= after[0]):
            detection = StallDetection(run.job, min(acted) - stalled, goal, noticed=True)
        else:  # lifted, or its worker went on, before anybody noticed
            lasted = (after[0] if after else stalled) - stalled
            detection = StallDetection(run.job, lasted, goal, noticed=False)
        if any(stalled <= at <= stalled + detection.detected_s for at in replaced_at):
            detection = replace(detection, measured=False)
        detections.append(detection)
    return detections


# --- figures of issue 41: a busy machine -----------------------------------------------------

STUCK_VERDICT = "stuck: "  # how a worker's own stall verdict begins in the history
VERDICT_LIMIT = re.compile(r"\(limit ([\d.]+) s")


@dataclass(frozen=True)
class HangDetection:
    job: int
    detected_s: float  # from the hung step to its worker's "stuck" verdict
    bound_s: float  # the limit the verdict stated + one heartbeat interval; inf: no verdict

    @property
    def late(self) -> bool:
        return not math.isfinite(self.bound_s) or self.detected_s > self.bound_s


def contention_figures(
    timelines: Mapping[int, Sequence[JobTransition]],
    ledger: Sequence[LedgerEntry],
    timing: Timing,
) -> dict[str, float]:
    hangs = hang_detections(ledger, timelines, timing)
    return {
        "healthy_jobs_called_stuck": len(healthy_jobs_called_stuck(timelines, ledger)),
        "hang_detected_s": round(max((h.detected_s for h in hangs), default=0.0), 2),
        "hang_bound_s": round(min((h.bound_s for h in hangs), default=0.0), 2),
        "hangs": len(hangs),
        "hangs_late": sum(h.late for h in hangs),
    }


def healthy_jobs_called_stuck(
    timelines: Mapping[int, Sequence[JobTransition]], ledger: Iterable[LedgerEntry]
) -> set[int]:
    """Jobs with a "stuck" verdict none of whose runs was stalled on purpose."""
    stalled = {run.job for run in runs_of(ledger) if run.stalled_at() is not None}
    return {
        job for job, rows in timelines.items()
        if job not in stalled and any(row.message.startswith(STUCK_VERDICT) for row in rows)
    }  # fmt: skip


def hang_slack_s(timing: Timing) -> float:
    """What a verdict may come later than its limit: the next beat, and the spacing of the
    CPU samples its quiet time is read from."""
    return timing.heartbeat_interval_s + CPU_SAMPLE_SPACING_S


def hang_detections(
    ledger: Iterable[LedgerEntry],
    timelines: Mapping[int, Sequence[JobTransition]],
    timing: Timing,
) -> list[HangDetection]:
    """For each run of a planted job that hung: how long until its worker said "stuck"."""
    detections = []
    for run in runs_of(ledger):
        stalled = run.stalled_at()
        if stalled is None or run.job not in timing.planted:
            continue
        verdicts = [
            row for row in timelines.get(run.job, [])
            if row.at >= stalled and row.message.startswith(STUCK_VERDICT)
        ]  # fmt: skip
        if not verdicts:
            after = [m.at for m in run.marks if m.at > stalled]
            lasted = (after[0] if after else stalled) - stalled
            detections.append(HangDetection(run.job, lasted, math.inf))
            continue
        limit = VERDICT_LIMIT.search(verdicts[0].message)
        bound_s = float(limit.group(1)) + hang_slack_s(timing) if limit else math.inf
        detections.append(HangDetection(run.job, verdicts[0].at - stalled, bound_s))
    return detections
