"""Argument types shared by the commands: a bad value is refused by argparse (exit code 2)."""

from __future__ import annotations

import argparse

from app.models.tables import MAX_JOB_ID


def job_id(text: str) -> int:
    """A job id as typed: a whole number that a job could have."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a job id (a whole number)") from None
    if not 1 <= value <= MAX_JOB_ID:
        raise argparse.ArgumentTypeError(
            f"no job has the id {value} (ids go from 1 to {MAX_JOB_ID})"
        )
    return value


def at_least_one(text: str) -> int:
    """A count as typed: a whole number of at least 1 (`--limit`, `--count`, `--batch-count`)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value
