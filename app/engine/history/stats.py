"""Statistics from the history alone: what happened to the jobs submitted in a period.

One pass over the timelines of the jobs submitted in [since, until): counts, durations and
failure rates per transition show where time and jobs go (docs/architecture.md, *History*).
Every job submitted in the period counts, whether with SUBMIT or, as a job that waits for
its parents, SUBMIT_AFTER. Times are measured between transitions: waiting is submission to
the first START (for a dependent job, its parents' time included), running is every
stretch in PROCESSING, paused is every finished stretch in PAUSED.

Throughput is per hour of work, not per hour of the period: the working time is the union
of the stretches in which a worker held one of these jobs (PROCESSING, CANCELLING or
PAUSING), so a queue that worked one hour of a month made its images in that hour.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import bindparam, case, or_, select

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.models.db import HotTransaction
from app.models.tables import JOB, TRANSITION

_RESUMED = re.compile(r"resumed from step (\d+)")
_OOM = ("out of memory", "outofmemoryerror", "memoryerror", "can't allocate memory")


class Cause(StrEnum):
    OUT_OF_MEMORY = "out of memory"
    MODEL_LOAD = "model load"
    OTHER_ERROR = "other error"
    WORKER_LOST = "worker lost"
    USER_CANCELLED = "user cancelled"


def cause_of(event: str, message: str) -> Cause | None:
    """Why an attempt ended badly, from its transition; None if it did not."""
    if event == JobEvent.TIMEOUT:
        return Cause.WORKER_LOST
    if event == JobEvent.CANCEL:
        return Cause.USER_CANCELLED
    if event != JobEvent.FAIL:
        return None
    text = message.casefold()
    if any(marker in text for marker in _OOM):
        return Cause.OUT_OF_MEMORY
    if "model" in text and ("load" in text or "not found" in text or "missing" in text):
        return Cause.MODEL_LOAD
    return Cause.OTHER_ERROR


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile (a value that occurred); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclass
class Stats:
    since: float
    until: float
    jobs: int = 0
    per_status: Counter[str] = field(default_factory=Counter)
    wait_s: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    run_s: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    paused_s: float = 0.0
    attempts: int = 0
    causes: Counter[Cause] = field(default_factory=Counter)
    steps_saved: int = 0
    succeeded: int = 0
    held: list[tuple[float, float]] = field(default_factory=list)  # [start, end) in a worker

    @property
    def working_s(self) -> float:
        """How long at least one of these jobs was held by a worker (the union of `held`)."""
        total, reach = 0.0, -math.inf
        self.held.sort()
        for start, end in self.held:
            if end > reach:
                total += end - (start if start > reach else reach)
                reach = end
        return total

    def per_working_hour(self, working_s: float) -> float | None:
        return self.succeeded / (working_s / 3600) if working_s > 0 else None

    def failure_rates(self) -> dict[str, float]:
        """Endings of each cause per job submitted (a job that failed twice counts twice)."""
        return {cause.value: n / self.jobs for cause, n in sorted(self.causes.items())}

    def as_dict(self) -> dict[str, Any]:
        def spread(groups: dict[str, list[float]]) -> dict[str, dict[str, float | None]]:
            return {
                key: {
                    "p50": percentile(values, 0.5),
                    "p95": percentile(values, 0.95),
                    "n": len(values),
                }
                for key, values in sorted(groups.items())
            }

        working_s = self.working_s
        return {
            "since": self.since, "until": self.until, "jobs": self.jobs,
            "per_status": dict(sorted(self.per_status.items())),
            "wait_s": spread(self.wait_s), "run_s": spread(self.run_s),
            "paused_s": self.paused_s, "attempts": self.attempts,
            "failure_rate": self.failure_rates(), "steps_saved_by_resume": self.steps_saved,
            "working_s": working_s, "images_per_working_hour": self.per_working_hour(working_s),
        }  # fmt: skip

    def lines(self) -> list[str]:
        return lines_of(self.as_dict())


def lines_of(data: dict[str, Any]) -> list[str]:
    """`Stats.as_dict()` for people: the command line's `stats` and the stats panel."""
    per_status = ", ".join(f"{n} {s}" for s, n in data["per_status"].items())
    out = [f"{data['jobs']} jobs: {per_status}"]
    for title, key in (("wait", "wait_s"), ("run", "run_s")):
        for group, spread in data[key].items():
            p50, p95 = _s(spread["p50"]), _s(spread["p95"])
            out.append(f"{title:<5} {group:<28} p50 {p50}  p95 {p95}  ({spread['n']})")
    saved = data["steps_saved_by_resume"]
    out.append(f"paused {_s(data['paused_s'])} in all; {saved} steps saved by resume")
    for cause, rate in sorted(data["failure_rate"].items()):
        out.append(f"{cause:<15} {rate:.1%} of {data['jobs']} jobs ({data['attempts']} attempts)")
    rate = data["images_per_working_hour"]
    out.append(
        f"throughput {'-' if rate is None else f'{rate:.1f}'} images an hour of work "
        f"({_s(data['working_s'])} with at least one job running)"
    )
    return out


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


def group_of(model: str, width: int, height: int) -> str:
    return f"{model} {width}x{height}"


def history_stats(queue: JobQueue, since: float, until: float) -> Stats:
    submitted = select(TRANSITION.c.job_id).where(
        TRANSITION.c.at >= bindparam("since"), TRANSITION.c.at < bindparam("until"),
        or_(*(TRANSITION.c.event == event for event in _SUBMISSIONS)),
    )  # fmt: skip
    # Messages only where they tell something (a cause, a resume): most rows have none, and
    # reading a month of them is a third of the time.
    # OR of equalities, not IN: IN's expanding parameter needs Core's execution.
    tells = or_(*(TRANSITION.c.event == event for event in _TELLING))
    telling = case((tells, TRANSITION.c.message), else_="")
    timelines = (
        select(
            TRANSITION.c.job_id,
            TRANSITION.c.event,
            TRANSITION.c.to_status,
            TRANSITION.c.at,
            telling,
        )
        .where(TRANSITION.c.job_id.in_(submitted))
        .order_by(TRANSITION.c.job_id, TRANSITION.c.id)
    )
    jobs = select(JOB.c.id, JOB.c.model, JOB.c.width, JOB.c.height).where(JOB.c.id.in_(submitted))
    bounds = {"since": since, "until": until}
    with queue.db.read() as conn:
        # Straight on the driver's cursor: SQLAlchemy's row objects cost more than SQLite's
        # reading for a month of history (see benchmarks/history.py, stats_ms).
        driver: Any = conn.connection.driver_connection
        cursor = HotTransaction(driver.cursor())
        found = cursor.execute(queue.db.prepare(jobs), bounds).fetchall()
        groups = {job_id: group_of(model, width, height) for job_id, model, width, height in found}
        rows = cursor.execute(queue.db.prepare(timelines), bounds).fetchall()
    stats = Stats(since, until)
    start = 0
    for end in range(1, len(rows) + 1):
        if end == len(rows) or rows[end][0] != rows[start][0]:
            _add_timeline(stats, groups[rows[start][0]], rows[start:end])
            start = end
    return stats


# Plain strings: comparing them is several times cheaper than comparing StrEnum members.
_START, _PROCESSING, _PAUSED, _SUCCESS = "START", "PROCESSING", "PAUSED", "SUCCESS"
_TELLING = ("FAIL", "COMPLETE", "STOPPED")
_SUBMISSIONS = (JobEvent.SUBMIT.value, JobEvent.SUBMIT_AFTER.value)
_HELD = frozenset(status.value for status in JobStatus if status.is_running)  # by a worker
_ENDING_BADLY = frozenset({"FAIL", "TIMEOUT", "CANCEL"})


def _add_timeline(stats: Stats, group: str, timeline: Sequence[Any]) -> None:
    """One job's transitions, oldest first: (job, event, to_status, at, message).

    Each row closes the stretch the row before it opened (in PROCESSING, PAUSED, ...)."""
    submitted_at = timeline[0][3]
    stats.jobs += 1
    stats.per_status[timeline[-1][2]] += 1
    waited = False
    ran = 0.0
    before, since = "", 0.0  # the status the previous row moved to, and when
    held_since: float | None = None  # a worker holds the job from then (one stretch)
    for _, event, status, at, message in timeline:
        # Clamped at 0: rows written before the queue had one clock (`JobQueue.clock`) by
        # machines whose clocks disagreed may run backwards; no duration shown is negative.
        if before == _PROCESSING:
            ran += max(0.0, at - since)
        elif before == _PAUSED:
            stats.paused_s += max(0.0, at - since)
        if status in _HELD:
            if held_since is None:
                held_since = at
        elif held_since is not None:
            stats.held.append((held_since, max(held_since, at)))
            held_since = None
        if event == _START:
            stats.attempts += 1
            if not waited:
                stats.wait_s[group].append(max(0.0, at - submitted_at))
                waited = True
        elif status == _SUCCESS:
            stats.succeeded += 1
        if event in _ENDING_BADLY:
            stats.causes[cause_of(event, message) or Cause.OTHER_ERROR] += 1
        if message:
            resumed = _RESUMED.search(message)
            if resumed:
                stats.steps_saved += int(resumed.group(1))
        before, since = status, at
    if held_since is not None and since > held_since:  # still held: up to its last change
        stats.held.append((held_since, since))
    if ran > 0 and before == _SUCCESS:
        # A job's time in a worker over all its attempts, for the jobs that made their image:
        # a run cancelled after a few steps says nothing of how long one takes (issue 28.3).
        stats.run_s[group].append(ran)
