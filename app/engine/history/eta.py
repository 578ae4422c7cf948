"""Learned run times: how long a job will take, from the jobs that already ran.

A finished job teaches its run time (its last claim to its success) under its key:
model, size, steps and device (the worker's host: one machine, one device). The estimate
for a new job is the median of its exact key once `MIN_SAMPLES` ran, else the nearest
match scaled: same model and size on any device scaled by steps, then any job scaled by
pixels x steps. Jobs that were resumed teach nothing: their last claim ran only the rest.

A model load is not part of a job's run time: the worker's timeline says how long it took
("model loaded in 6.2 s", `generation.loader.Fetched`), which is taken off the sample and
learned per model instead. A queued job whose model no live worker holds
(`JobQueue.models_held`) then expects that load on top; the queue as a whole expects one
load per model nobody holds, since claims keep a model's jobs together.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
from collections.abc import Collection, Hashable, Iterable
from dataclasses import dataclass, field

from sqlalchemy import and_, exists, select

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.models.tables import JOB, TRANSITION, Job

MIN_SAMPLES = 3
LEARN_FROM_LAST = 2000  # the newest successes only: drivers, models and machines change
_LOADED_IN = re.compile(r"model (?:loaded|copied back from RAM) in (\d+(?:\.\d+)?) s")
_COMPILED_IN = re.compile(r"compiling the model… \(once\) took (\d+(?:\.\d+)?) s")


@dataclass(frozen=True)
class Sample:
    model: str
    width: int
    height: int
    steps: int
    device: str
    seconds: float
    load_s: float = 0.0  # of `seconds`, the model's load (copy back from RAM), if any

    @property
    def work(self) -> int:
        return self.width * self.height * self.steps


def device_of(worker_id: str | None) -> str:
    """The host part of `host:pid:token`: the device a job ran on, as near as the row says."""
    return (worker_id or "").split(":", 1)[0]


class _Medians:
    """Sorted values per key, so a median is one lookup while samples keep arriving."""

    def __init__(self) -> None:
        self._values: dict[Hashable, list[float]] = defaultdict(list)

    def add(self, key: Hashable, value: float) -> None:
        bisect.insort(self._values[key], value)

    def median(self, key: Hashable, at_least: int = 1) -> float | None:
        values = self._values.get(key)
        if not values or len(values) < at_least:
            return None
        middle = len(values) // 2
        return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


@dataclass
class Estimator:
    exact: _Medians = field(default_factory=_Medians)
    per_step: _Medians = field(default_factory=_Medians)  # seconds per step, by model + size
    per_work: _Medians = field(default_factory=_Medians)  # seconds per pixel-step, overall
    loads: _Medians = field(default_factory=_Medians)  # a model's load, by model and overall

    def add(self, sample: Sample) -> None:
        if sample.load_s > 0:
            self.loads.add(sample.model, sample.load_s)
            self.loads.add(None, sample.load_s)
        seconds = sample.seconds - sample.load_s
        if seconds <= 0 or sample.steps <= 0:
            return
        key = (sample.model, sample.width, sample.height)
        self.exact.add((*key, sample.steps, sample.device), seconds)
        self.per_step.add(key, seconds / sample.steps)
        self.per_work.add(None, seconds / sample.work)

    def load_estimate(self, model: str) -> float:
        """Expected seconds to load `model` (any model's, before it loaded once; 0 before
        any load was timed)."""
        return self.loads.median(model) or self.loads.median(None) or 0.0

    def estimate(
        self, model: str, width: int, height: int, steps: int, device: str
    ) -> float | None:
        """Expected seconds, or None before any job ran."""
        exact = self.exact.median((model, width, height, steps, device), MIN_SAMPLES)
        if exact is not None:
            return exact
        per_step = self.per_step.median((model, width, height))
        if per_step is not None:
            return per_step * steps
        per_work = self.per_work.median(None)
        return None if per_work is None else per_work * width * height * steps


def learned(queue: JobQueue, limit: int = LEARN_FROM_LAST) -> Estimator:
    estimator = Estimator()
    for sample in samples(queue, limit):
        estimator.add(sample)
    return estimator


def samples(queue: JobQueue, limit: int = LEARN_FROM_LAST) -> list[Sample]:
    resumed = exists().where(
        and_(TRANSITION.c.job_id == JOB.c.id, TRANSITION.c.event == JobEvent.RESUME.value)
    )
    completed = (  # its message says how the model was found
        select(TRANSITION.c.message)
        .where(TRANSITION.c.job_id == JOB.c.id, TRANSITION.c.event == JobEvent.COMPLETE.value)
        .order_by(TRANSITION.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    query = (
        select(
            JOB.c.model,
            JOB.c.width,
            JOB.c.height,
            JOB.c.steps,
            JOB.c.worker_id,
            JOB.c.started_at,
            JOB.c.finished_at,
            completed.label("completed"),
        )
        .where(JOB.c.status == JobStatus.SUCCESS.value, JOB.c.started_at.is_not(None), ~resumed)
        .order_by(JOB.c.finished_at.desc())
        .limit(limit)
    )
    with queue.db.read() as conn:
        rows = conn.execute(query).all()
    return [
        Sample(model, width, height, steps, device_of(worker), finished - started, loaded_s)
        for model, width, height, steps, worker, started, finished, loaded_s in (
            (*row[:-1], load_seconds(row[-1])) for row in rows
        )
        if finished is not None
    ]


def load_seconds(message: str | None) -> float:
    """The load a COMPLETE message reports ("...; model loaded in 6.2 s"), with the model's
    compile if it compiled then ("compiling the model… (once) took 41.2 s"); 0 if none."""
    return sum(
        float(found.group(1)) for pattern in (_LOADED_IN, _COMPILED_IN)
        if (found := pattern.search(message or ""))
    )  # fmt: skip


def job_estimate(
    estimator: Estimator, job: Job, device: str = "", held: Collection[str] | None = None
) -> float | None:
    """Seconds left for `job`: all of it if queued, the rest of it if running. `held`: the
    models live workers hold (`JobQueue.models_held`): a queued job for any other model
    also expects its load (None: loads not counted)."""
    whole = estimator.estimate(job.model, job.width, job.height, job.steps,
                               device_of(job.worker_id) or device)  # fmt: skip
    if whole is None:
        return None
    if JobStatus(job.status).is_running and job.progress_total:
        return whole * max(0.0, 1 - job.progress_step / job.progress_total)
    if held is not None and job.model not in held:
        whole += estimator.load_estimate(job.model)
    return whole


@dataclass(frozen=True)
class QueueEstimate:
    queued: int
    seconds: float | None  # None: nothing has run yet to learn from
    workers: int

    def line(self) -> str:
        if self.queued == 0:
            return "nothing queued"
        if self.seconds is None:
            return f"{self.queued} queued (no finished job yet to estimate from)"
        return f"{self.queued} queued, about {duration_words(self.seconds)}"


def queue_estimate(
    estimator: Estimator,
    jobs: Iterable[Job],
    *,
    workers: int = 1,
    device: str = "",
    held: Collection[str] | None = None,
) -> QueueEstimate:
    """How long until the queued and running `jobs` are done, with `workers` in parallel.
    `held`: the models live workers hold; each other model of a queued job adds one load
    (claims keep a model's jobs together; None: loads not counted)."""
    waiting = [j for j in jobs if j.status == JobStatus.PENDING or JobStatus(j.status).is_running]
    estimates = [job_estimate(estimator, job, device) for job in waiting]
    known = [e for e in estimates if e is not None]
    if not known:
        return QueueEstimate(len(waiting), None, workers)
    # Jobs nobody has an estimate for count as the average of those that have one.
    total = sum(known) + (len(estimates) - len(known)) * (sum(known) / len(known))
    if held is not None:
        to_load = {j.model for j in waiting if j.status == JobStatus.PENDING} - set(held)
        total += sum(estimator.load_estimate(model) for model in to_load)
    return QueueEstimate(len(waiting), total / max(1, workers), workers)


def duration_words(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{math.ceil(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
