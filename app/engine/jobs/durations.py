"""How long a job ran, from its history: every attempt counts."""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.jobs.states import JobStatus

# (seconds spent in PROCESSING, start of the stretch still open, or None)
RunningTime = tuple[float, float | None]


def running_time(history: Sequence[tuple[JobStatus, float]]) -> RunningTime:
    """(seconds spent in PROCESSING, start of the stretch still open) from a job's history
    as (status entered, time), oldest first. Every attempt counts: a job that ran 40 s,
    was paused and ran 20 s more has run 60 s (like the stats of app.engine.history)."""
    total, since = 0.0, None
    for status, at in history:
        if since is not None:
            total += max(0.0, at - since)
        since = at if status is JobStatus.PROCESSING else None
    return total, since
