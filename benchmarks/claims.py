"""Claims per second with four spawned worker processes draining one queue.

Each process claims until nothing is PENDING; a double claim would show as a job id
claimed by two processes, or as two START rows in one job's history.

    .venv/bin/python benchmarks/claims.py [--jobs 2000] [--processes 4] [--db URL]
        [--synchronous NORMAL]

`--db postgresql://...`: the same on PostgreSQL, in a scratch schema dropped afterwards.
`--synchronous NORMAL`: SQLite commits as before issue 34 (not durable against a power cut),
to see what FULL costs.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import func, select

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.db import SYNCHRONOUS_ENV
from app.models.opening import open_database
from app.models.postgres import scratch_schema
from app.models.tables import TRANSITION


@contextmanager
def scratch_store(db_url: str | None) -> Iterator[str]:
    """A fresh store: a SQLite file in a temp folder, or a scratch schema in `db_url`."""
    if db_url:
        with scratch_schema(db_url) as location:
            yield location
    else:
        with tempfile.TemporaryDirectory(prefix="easel-bench-") as tmp:
            yield str(Path(tmp) / "claims.db")


def claim_until_empty(db_path: str, worker_id: str) -> list[int]:
    queue = JobQueue(open_database(db_path))
    claimed: list[int] = []
    while (job := queue.claim(worker_id)) is not None:
        claimed.append(job.id or 0)  # a claimed job is stored: it has an id
    queue.db.dispose()
    return claimed


def warm_up(db_path: str) -> None:
    """Imports and a first connection, so the timing is of claims, not start-up."""
    JobQueue(open_database(db_path)).db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--db", metavar="URL", help="a PostgreSQL URL (default: a SQLite file)")
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL",
                        help="SQLite's commit level (NORMAL: only to compare)")  # fmt: skip
    args = parser.parse_args()
    os.environ[SYNCHRONOUS_ENV] = args.synchronous  # the spawned claimers inherit it
    with scratch_store(args.db) as db_path:
        queue = JobQueue(open_database(db_path))
        queue.submit_many([GenerationParams("a blue triangle", seed=1, steps=2)] * args.jobs)
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(args.processes) as pool:
            pool.map(warm_up, [db_path] * args.processes)
            start = time.perf_counter()
            results = pool.starmap(
                claim_until_empty, [(db_path, f"w{i}") for i in range(args.processes)]
            )
            elapsed = time.perf_counter() - start
        claimed = Counter(job_id for result in results for job_id in result)
        with queue.db.read() as conn:
            start_rows = conn.execute(
                select(TRANSITION.c.job_id, func.count())
                .where(TRANSITION.c.event == "START")
                .group_by(TRANSITION.c.job_id)
                .having(func.count() > 1)
            ).all()
        queue.db.dispose()
    double_claims = sum(n - 1 for n in claimed.values() if n > 1) + len(start_rows)
    print(f"claims_per_s: {len(claimed) / elapsed:.0f}")
    print(f"claimed: {len(claimed)}")
    print(f"double_claims: {double_claims}")
    print(f"per_process: {' '.join(str(len(r)) for r in results)}")


if __name__ == "__main__":
    main()
