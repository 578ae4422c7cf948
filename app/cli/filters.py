"""The history filters shared by `jobs` and `stats`: --search, --since, --model, --size."""

from __future__ import annotations

import argparse
import time

from app.engine.history.search import JobFilter, parse_duration
from app.engine.jobs.params import parse_size


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--search",
        default="",
        metavar="WORDS",
        help='prompt words: red circle, "a phrase", -left-out, prefix*, neg:word',
    )
    parser.add_argument("--since", metavar="AGE", help="only jobs made in the last AGE (7d, 12h)")
    parser.add_argument("--model", help="only jobs of this model")
    parser.add_argument("--size", dest="filter_size", metavar="WxH", help="only jobs of this size")
    parser.add_argument("--starred", action="store_true", help="only favourites")  # fmt: skip


def since_from_args(args: argparse.Namespace, now: float | None = None) -> float | None:
    """The start of the period `--since AGE` names (`BadSearch` for a malformed AGE)."""
    if args.since is None:
        return None
    return (time.time() if now is None else now) - parse_duration(args.since)


def filter_from_args(args: argparse.Namespace) -> JobFilter:
    """Malformed input raises `BadSearch` or `InvalidParameters` (one line, exit 2)."""
    return JobFilter(
        text=args.search,
        statuses=frozenset(args.status or ()),
        model=args.model,
        size=parse_size(args.filter_size) if args.filter_size else None,
        since=since_from_args(args),
        starred=True if args.starred else None,
    )
