"""Stats equal a brute-force recount of the same timelines, read one job at a time: every
submission counts (dependent jobs too), and throughput is per hour of work."""

from __future__ import annotations

import tempfile
from itertools import pairwise
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.history.stats import history_stats, percentile
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import TRANSITIONS, JobEvent, JobStatus, TransitionNotAllowed
from app.models.opening import open_database

MESSAGES = ("CUDA out of memory", "could not load model sd15", "ValueError: bad", "")
FAIL_CAUSES = {"CUDA out of memory": "out of memory", "could not load model sd15": "model load"}
WALK = st.lists(st.tuples(st.integers(0, 20), st.floats(0.5, 50.0), st.sampled_from(MESSAGES)),
                max_size=8)  # fmt: skip


def walk(
    queue: JobQueue, clock: list[float], job_id: int, steps: list[tuple[int, float, str]]
) -> None:
    """Drive one job through the real table: each step picks one of the events it allows."""
    for choice, pause, message in steps:
        clock[0] += pause
        status = JobStatus(queue.get(job_id).status)
        events = sorted(e for (s, e) in TRANSITIONS if s == status)
        if not events:
            return
        event = events[choice % len(events)]
        if event is JobEvent.START:
            queue.claim("host:1:t", job_id=job_id)
            continue
        note = f"resumed from step {choice}; {message}" if event is JobEvent.COMPLETE else message
        try:
            queue.fire(job_id, event, source="test", message=note)
        except TransitionNotAllowed:  # UNBLOCK before every parent succeeded: it stays
            continue


def recount(queue: JobQueue, ids: list[int], since: float, until: float) -> dict[str, object]:
    per_status: dict[str, int] = {}
    held: list[tuple[float, float]] = []  # a worker held one of the jobs from .. to
    wait: dict[str, list[float]] = {}
    run: dict[str, list[float]] = {}
    attempts = saved = succeeded = 0
    paused = 0.0
    causes: dict[str, int] = {}
    for job_id in ids:
        timeline = queue.timeline(job_id)
        if not since <= timeline[0].at < until:
            continue
        job = queue.get(job_id)
        group = f"{job.model} {job.width}x{job.height}"
        per_status[timeline[-1].to_status] = per_status.get(timeline[-1].to_status, 0) + 1
        starts = [t for t in timeline if t.event == "START"]
        attempts += len(starts)
        if starts:
            wait.setdefault(group, []).append(starts[0].at - timeline[0].at)
        ran = 0.0
        for here, nxt in pairwise(timeline):
            if here.to_status == "PROCESSING":
                ran += nxt.at - here.at
            if here.to_status == "PAUSED":
                paused += nxt.at - here.at
            if here.to_status in ("PROCESSING", "CANCELLING", "PAUSING"):
                held.append((here.at, nxt.at))
        if ran and timeline[-1].to_status == "SUCCESS":  # cancelled runs say nothing of it
            run.setdefault(group, []).append(ran)
        for t in timeline:
            cause = {"TIMEOUT": "worker lost", "CANCEL": "user cancelled"}.get(t.event)
            if t.event == "FAIL":
                cause = FAIL_CAUSES.get(t.message, "other error")
            if cause:
                causes[cause] = causes.get(cause, 0) + 1
            if t.event == "COMPLETE" and t.message.startswith("resumed from step "):
                saved += int(t.message.split()[3].rstrip(";"))
            succeeded += t.to_status == "SUCCESS"

    def spread(groups: dict[str, list[float]]) -> dict[str, dict[str, float | None]]:
        return {g: {"p50": percentile(v, 0.5), "p95": percentile(v, 0.95), "n": len(v)}
                for g, v in sorted(groups.items())}  # fmt: skip

    return {
        "jobs": sum(per_status.values()), "per_status": dict(sorted(per_status.items())),
        "wait_s": spread(wait), "run_s": spread(run), "paused_s": paused,
        "attempts": attempts, "steps_saved_by_resume": saved,
        "failure_rate": {c: n / sum(per_status.values()) for c, n in causes.items()},
        "working_s": covered(held),
        "images_per_working_hour": succeeded / (covered(held) / 3600) if covered(held) else None,
    }  # fmt: skip


def covered(stretches: list[tuple[float, float]]) -> float:
    """The time inside at least one stretch: each piece between two consecutive ends, once."""
    points = sorted({p for stretch in stretches for p in stretch})
    return sum(
        right - left
        for left, right in pairwise(points)
        if any(start <= left and right <= end for start, end in stretches)
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    walks=st.lists(
        st.tuples(st.sampled_from([(64, 64), (96, 64)]), WALK, st.none() | st.integers(0, 11)),
        min_size=1,
        max_size=12,
    ),
    since=st.floats(0, 400),
    length=st.floats(1, 800),
)
def test_stats_equal_a_brute_force_recount(
    walks: list[tuple[tuple[int, int], list[tuple[int, float, str]], int | None]],
    since: float,
    length: float,
) -> None:
    clock = [0.0]
    with tempfile.TemporaryDirectory() as folder:
        queue = JobQueue(open_database(Path(folder) / "easel.db"), clock=lambda: clock[0])
        ids: list[int] = []
        for (width, height), steps, parent in walks:
            clock[0] += 10
            # Some wait for an earlier job (SUBMIT_AFTER, BLOCKED), as an upscale does.
            able = [i for i in ids if queue.get(i).status != JobStatus.CANCELLED]
            parents = [able[parent % len(able)]] if able and parent is not None else []
            params = GenerationParams("a cat", width=width, height=height)
            ids.append(queue.submit(params, parents=parents))
            walk(queue, clock, ids[-1], steps)
        stats = history_stats(queue, since, since + length).as_dict()
        expected = recount(queue, ids, since, since + length)
        queue.db.dispose()
    assert {key: stats[key] for key in expected} == _approx(expected, stats)


def _approx(expected: dict[str, object], got: dict[str, object]) -> dict[str, object]:
    """`expected`, with float sums taken as equal when they agree to 1e-9 (summing order)."""
    out = dict(expected)
    for key in ("paused_s", "working_s", "images_per_working_hour"):
        both = expected[key] is not None and got[key] is not None
        if both and abs(float(str(expected[key])) - float(str(got[key]))) < 1e-9:
            out[key] = got[key]
    return out


def test_the_run_time_median_counts_only_runs_that_made_their_image(tmp_path: Path) -> None:
    """Issue 28.3: a 1:48 job showed a 23 s median, cancelled runs pulling it down."""
    clock = [1000.0]
    queue = JobQueue(open_database(tmp_path / "easel.db"), clock=lambda: clock[0])
    for ran_s, cancelled in ((108.0, False), (5.0, True), (3.0, True)):
        job_id = queue.submit(GenerationParams("a cat", steps=20, width=64, height=64))
        queue.claim("host:1:t")
        clock[0] += ran_s
        if cancelled:
            queue.cancel(job_id)
            queue.fire(job_id, JobEvent.STOPPED, source="worker")
        else:
            queue.fire(job_id, JobEvent.COMPLETE, source="worker")
        clock[0] += 1.0
    data = history_stats(queue, 0.0, clock[0] + 1).as_dict()
    assert data["run_s"] == {"easel-tiny 64x64": {"p50": 108.0, "p95": 108.0, "n": 1}}
    queue.db.dispose()
