"""Safe to leave running (issue 34): the server fuzzed, and what durable commits cost.

- fuzz_requests, fuzz_server_errors (goal 0), fuzz_passed: the real `schemathesis run`
  against the server's OpenAPI schema, every phase, random requests (a new seed each run,
  printed as fuzz_seed to replay one), more per operation than the test suite's run
- transitions_per_s_full, transitions_per_s_normal, transitions_per_s_full_vs_normal:
  `JobQueue.fire` on a SQLite file with `synchronous=FULL` (what Easel runs: an acknowledged
  job survives a power cut) and NORMAL (before: durable against a crash of the app only),
  rounds alternated so both see the same background load
- claims_per_s_full, claims_per_s_normal: four spawned processes draining one queue
- submit_p50_ms_full, submit_p50_ms_normal, submit_p99_ms_*: POST /api/v1/jobs, 8 clients at
  once, on `python -m app serve --no-workers`
- png_params_ms_64kb (goal <= 5), png_params_ms_1mb_refused: benchmarks/security_png.py
- callback_slow_receiver_delay_s (goal <= callback_deadline_s), callback_sender_held_s,
  callback_one_slow_receiver_delay_s: benchmarks/security_callbacks.py

    .venv/bin/python benchmarks/security.py [--examples 100] [--seed N] [--only NAME]

Each measure is a name and a function in MEASURES; one returning a dict prints each entry.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script, from anywhere

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.db import SYNCHRONOUS_ENV
from app.models.opening import open_database
from app.testing.api_fuzz import fuzzable_server, run_schemathesis
from benchmarks.claims import claim_until_empty
from benchmarks.security_callbacks import measure as callback_cost
from benchmarks.security_png import png_params_ms_1mb_refused, png_params_ms_64kb
from benchmarks.server import free_port, p99, server, submit_latencies
from benchmarks.transitions import queue_side

LEVELS = ("FULL", "NORMAL")
Measure = Callable[[], object]


@contextmanager
def synchronous(level: str) -> Iterator[None]:
    """SQLite connections opened meanwhile (here and in processes started meanwhile) commit
    at `level`."""
    before = os.environ.get(SYNCHRONOUS_ENV)
    os.environ[SYNCHRONOUS_ENV] = level
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SYNCHRONOUS_ENV, None)
        else:
            os.environ[SYNCHRONOUS_ENV] = before


@contextmanager
def scratch_folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="easel-bench-security-") as tmp:
        yield Path(tmp)


# --- the fuzz ---------------------------------------------------------------------------------


def fuzz(examples: int, seed: int | None) -> dict[str, object]:
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    with scratch_folder() as folder:
        queue = JobQueue(open_database(folder / "easel.db"))
        with fuzzable_server(queue, free_port()) as url:
            report = run_schemathesis(url, folder, examples=examples, seed=seed)
        queue.db.dispose()
    if not report.passed:
        print(report.output, flush=True)  # the failures, each with a curl to reproduce it
    return {
        "fuzz_requests": report.requests,
        "fuzz_server_errors": report.server_errors,
        "fuzz_passed": report.passed,
        "fuzz_seed": seed,
    }


# --- what synchronous=FULL costs ---------------------------------------------------------------


def transitions(count: int, rounds: int) -> dict[str, object]:
    rates: dict[str, list[float]] = {level: [] for level in LEVELS}
    with scratch_folder() as folder:
        sides = {}
        for level in LEVELS:
            with synchronous(level):
                sides[level] = queue_side(str(folder / f"{level}.db"))
        for _ in range(rounds):
            for level in LEVELS:
                with synchronous(level):
                    rates[level].append(sides[level](count))
    full, normal = (statistics.median(rates[level]) for level in LEVELS)
    return {
        "transitions_per_s_full": f"{full:.0f}",
        "transitions_per_s_normal": f"{normal:.0f}",
        "transitions_per_s_full_vs_normal": f"{full / normal:.2f}",
    }


def claims(jobs: int, processes: int, rounds: int) -> dict[str, object]:
    rates: dict[str, list[float]] = {level: [] for level in LEVELS}
    for _ in range(rounds):
        for level in LEVELS:
            with synchronous(level), scratch_folder() as folder:
                rates[level].append(_claims_per_s(str(folder / "claims.db"), jobs, processes))
    return {f"claims_per_s_{level.lower()}": f"{statistics.median(rates[level]):.0f}"
            for level in LEVELS}  # fmt: skip


def _claims_per_s(db_path: str, jobs: int, processes: int) -> float:
    queue = JobQueue(open_database(db_path))
    queue.submit_many([GenerationParams("a blue triangle", seed=1, steps=2)] * jobs)
    queue.db.dispose()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(processes) as pool:
        start = manager.Barrier(processes)  # all race from one moment, not their spawn times
        # No model held, rows written once: the claims alone, as before model-aware claims.
        arguments = [(db_path, f"w{i}", None, True, start) for i in range(processes)]
        results = pool.starmap(claim_until_empty, arguments)
    elapsed = max(result[3] for result in results) - min(result[2] for result in results)
    return sum(len(result[0]) for result in results) / elapsed


def submits(count: int, rounds: int) -> dict[str, object]:
    latencies: dict[str, list[float]] = {level: [] for level in LEVELS}
    for _ in range(rounds):
        for level in LEVELS:
            with (
                synchronous(level),
                scratch_folder() as home,
                server(home, "--no-workers") as url,
            ):
                submit_latencies(url, 16)  # the first connections and imports
                latencies[level] += submit_latencies(url, count)
    out: dict[str, object] = {}
    for level in LEVELS:
        out[f"submit_p50_ms_{level.lower()}"] = f"{statistics.median(latencies[level]):.1f}"
        out[f"submit_p99_ms_{level.lower()}"] = f"{p99(latencies[level]):.1f}"
    return out


# --- the run ----------------------------------------------------------------------------------


def measures(args: argparse.Namespace) -> list[tuple[str, Measure]]:
    """Every measure, in the order printed (the other parts of issue 34 add theirs here)."""
    return [
        ("fuzz", partial(fuzz, args.examples, args.seed)),
        ("transitions", partial(transitions, args.transitions, args.rounds)),
        ("claims", partial(claims, args.jobs, 4, args.rounds)),
        ("submits", partial(submits, args.submits, args.rounds)),
        ("png", png_params),
        ("callbacks", callbacks),
    ]


def png_params() -> dict[str, str]:
    """A hostile A1111 settings line parsed, an oversized text chunk refused (ms)."""
    return {
        "png_params_ms_64kb": f"{png_params_ms_64kb():.2f}",
        "png_params_ms_1mb_refused": f"{png_params_ms_1mb_refused():.2f}",
    }


def callbacks() -> dict[str, str]:
    """What slow receivers cost another job's callback: every sender held, then one."""
    every, one = callback_cost(), callback_cost(slow_receivers=1)
    return {
        "callback_slow_receiver_delay_s": f"{every.delay_s:.2f}",
        "callback_sender_held_s": f"{every.held_s:.2f}",
        "callback_deadline_s": f"{every.deadline_s:g}",
        "callback_one_slow_receiver_delay_s": f"{one.delay_s:.2f}",
    }


def report(name: str, result: object) -> None:
    if isinstance(result, Mapping):
        for key, value in result.items():
            print(f"{key}: {value}", flush=True)
    else:
        print(f"{name}: {result}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100, help="per operation and phase")
    parser.add_argument("--seed", type=int, help="replay a fuzz run (default: a new seed)")
    parser.add_argument("--transitions", type=int, default=1000, help="per round and level")
    parser.add_argument("--jobs", type=int, default=1000, help="claimed per round and level")
    parser.add_argument("--submits", type=int, default=400, help="per round and level")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", action="append", help="run only these measures (repeatable)")
    args = parser.parse_args()
    for name, measure in measures(args):
        if args.only is None or name in args.only:
            report(name, measure())


if __name__ == "__main__":
    main()
