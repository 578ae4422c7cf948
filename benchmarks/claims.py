"""Claims per second: worker processes, each holding models, draining a mixed queue.

`--queued` jobs spread over `--models` models (shuffled, one seed) wait in one queue;
`--workers` spawned processes claim until nothing is PENDING, model-aware like a real
worker: each passes the models it holds (it "loads" the model of each job it takes, and
keeps the two most recent) and writes them to its worker row, so the others leave those
models to it: in the claim's own commit (`JobQueue.claim(row_models=LoadsTaken(...))`; on
PostgreSQL the claim function writes it in the claim's one round trip). Claimers open
the store patient, as a worker does (on SQLite they wait in line for the write lock). A
double claim would show as a job id claimed by two processes, or as two START rows in one
job's history. The affinity bound is checked from the history: claims are serialised, so
the history's START order is the claim order, and no job may have more than `max_skips`
younger jobs started before it.

    .venv/bin/python benchmarks/claims.py [--db URL|PATH] [--models 20] [--queued 10000]
        [--workers 8] [--static-rows | --separate-rows] [--synchronous NORMAL]

`--static-rows`: the worker rows are written once, at start (the claims alone).
`--separate-rows`: each new model's row write is a transaction of its own after the claim
(`Presence.update`, as before issue 41; on SQLite it waits for the claims' write lock and
pays a commit of its own).
`claimer_cpu_ms_per_claim`: the claimers' own CPU a claim; `server_cpu_ms_per_claim`
(PostgreSQL on this machine only): that of the server processes behind their claims, which
share the cores with them.
`--db postgresql://...`: the same on PostgreSQL, in a scratch schema dropped afterwards;
`--db PATH`: a new SQLite file at PATH (removed afterwards); by default one in a temp folder.
`--synchronous NORMAL`: SQLite commits as before issue 34 (not durable against a power cut),
to see what FULL costs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from app.engine.jobs.affinity import DEFAULT_BOUND
from app.engine.jobs.claim_function import LoadsTaken
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.workers.presence import Presence
from app.engine.workers.worker_states import WorkerState
from app.models.db import SYNCHRONOUS_ENV
from app.models.opening import open_database
from app.models.postgres import scratch_schema
from app.models.tables import TRANSITION

HELD_CAPACITY = 2  # models a benchmark worker keeps, most recently used first
ROW_BEAT_S = 2.0  # a worker row is written at least this often (peers count it 15 s)


@contextmanager
def scratch_store(db: str | None) -> Iterator[str]:
    """A fresh store: a scratch schema in a PostgreSQL URL, a new SQLite file at a path, or
    one in a temp folder."""
    if db and db.startswith("postgresql"):
        with scratch_schema(db) as location:
            yield location
    elif db:
        path = Path(db)
        if path.exists():
            sys.exit(f"{path} already exists: give the path of a new SQLite file.")
        try:
            yield str(path)
        finally:
            for leftover in (path, *(Path(f"{path}{end}") for end in ("-wal", "-shm", "-writers"))):
                leftover.unlink(missing_ok=True)
    else:
        with tempfile.TemporaryDirectory(prefix="easel-bench-") as tmp:
            yield str(Path(tmp) / "claims.db")


class BenchWorker:
    """A worker's claim loop without the generating: what it holds, and its worker row
    (written as a real worker's is, by `Presence`: a write that fails is logged and
    forgotten, never a reason to stop claiming)."""

    def __init__(
        self, queue: JobQueue, worker_id: str, first_model: str | None, *, rows: str
    ) -> None:
        self.queue = queue
        self.rows = rows  # "claim", "separate" or "static"
        self.held: list[str] = [first_model] if first_model else []
        self.presence = Presence(queue.db, worker_id, "bench")
        self.presence.register(device=None)
        self.rows_written = 0
        self.write_row()

    def holding(self, model: str) -> list[str]:
        """What it holds once it has `model`: that first, then the most recent others."""
        return [model, *[m for m in self.held if m != model]][:HELD_CAPACITY]

    def row_models(self) -> LoadsTaken | None:
        """For the claim's commit: the held models once it has the taken job's, if they
        change (on PostgreSQL the claim function applies it)."""
        return LoadsTaken(tuple(self.held), HELD_CAPACITY) if self.rows == "claim" else None

    def took(self, model: str) -> None:
        before = self.held
        self.held = self.holding(model)
        if self.rows == "claim" and set(self.held) != set(before):
            self.rows_written += 1  # written by the claim, in its commit
        if self.rows == "static":
            return
        changed = self.rows == "separate" and set(self.held) != set(before)
        if changed or time.monotonic() - self.row_written_at > ROW_BEAT_S:
            self.write_row()

    def write_row(self) -> None:
        self.row_written_at = time.monotonic()
        self.rows_written += 1
        self.presence.update(WorkerState.IDLE, models=json.dumps(self.held))


def server_cpu_s(queue: JobQueue) -> float | None:
    """The CPU seconds so far of the PostgreSQL server process behind this thread's hot
    connection, which makes the claims (read from /proc: a server on this machine only);
    None on SQLite or where it cannot be read."""
    if queue.db.is_sqlite:
        return None
    pid = queue.db.hot_connection().dbapi_connection.info.backend_pid
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def claim_until_empty(
    location: str, worker_id: str, first_model: str | None, rows: str, start: Any
) -> tuple[list[int], int, float, float, int, float, float | None]:
    """(the jobs claimed, how many were for a model held at the time, start, end, worker
    row writes, the CPU seconds this process spent claiming, and its PostgreSQL server
    process (None if unknown))."""
    # Patient, as a worker's store is (`app.engine.store.opening`): it waits out a held lock.
    queue = JobQueue(open_database(location, lock_timeout_s=None))
    worker = BenchWorker(queue, worker_id, first_model, rows=rows)
    claimed: list[int] = []
    hits = 0
    start.wait()  # all processes race from the same moment, not from their spawn times
    server_began = server_cpu_s(queue)
    began, cpu_began = time.perf_counter(), time.process_time()
    while (
        job := queue.claim(worker_id, models=worker.held, row_models=worker.row_models())
    ) is not None:
        claimed.append(job.id or 0)  # a claimed job is stored: it has an id
        hits += job.model in worker.held
        worker.took(job.model)
    ended, cpu_s = time.perf_counter(), time.process_time() - cpu_began
    server_ended = server_cpu_s(queue)
    server_s = None if server_began is None or server_ended is None else server_ended - server_began
    queue.db.dispose()
    return claimed, hits, began, ended, worker.rows_written, cpu_s, server_s


def submit_queue(queue: JobQueue, models: list[str], queued: int) -> None:
    """`queued` jobs, each for a model drawn at random (one seed), in batches."""
    draw = random.Random(41)
    batch = 1000
    for first in range(0, queued, batch):
        queue.submit_many(
            [
                GenerationParams("a blue triangle", model=draw.choice(models), seed=i, steps=2)
                for i in range(first, min(first + batch, queued))
            ]
        )


def most_overtaken(order: list[int]) -> int:
    """The most younger jobs any job saw claimed before it, `order` being the claim order
    (all one priority): a Fenwick tree over ids, O(n log n)."""
    size = max(order, default=0) + 1
    tree = [0] * (size + 1)
    worst = 0
    for seen, job_id in enumerate(order):
        index, older_seen = job_id, 0
        while index > 0:  # how many of those claimed before have an id <= job_id
            older_seen += tree[index]
            index -= index & -index
        worst = max(worst, seen - older_seen)
        index = job_id
        while index <= size:
            tree[index] += 1
            index += index & -index
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db", metavar="URL|PATH", help="a PostgreSQL URL or a new SQLite file's path"
    )
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=8)
    rows = parser.add_mutually_exclusive_group()
    rows.add_argument(
        "--static-rows",
        action="store_true",
        help="workers write their row once, at start, not at each new model: the claims alone",
    )
    rows.add_argument(
        "--separate-rows",
        action="store_true",
        help="each new model's row write is a transaction of its own (as before issue 41)",
    )
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL",
                        help="SQLite's commit level (NORMAL: only to compare)")  # fmt: skip
    args = parser.parse_args()
    os.environ[SYNCHRONOUS_ENV] = args.synchronous  # the spawned claimers inherit it
    if min(args.models, args.queued, args.workers) < 1:
        parser.error("--models, --queued and --workers must each be at least 1")
    models = [f"model-{index:02d}" for index in range(args.models)]
    row_writes = "static" if args.static_rows else "separate" if args.separate_rows else "claim"
    with scratch_store(args.db) as location:
        queue = JobQueue(open_database(location))
        submit_queue(queue, models, args.queued)
        firsts = [models[i] if i < len(models) else None for i in range(args.workers)]
        ctx = multiprocessing.get_context("spawn")
        with ctx.Manager() as manager, ctx.Pool(args.workers) as pool:
            start = manager.Barrier(args.workers)
            arguments = [
                (location, f"w{i}", firsts[i], row_writes, start) for i in range(args.workers)
            ]
            results = pool.starmap(claim_until_empty, arguments)
        elapsed = max(r[3] for r in results) - min(r[2] for r in results)
        claimed = Counter(job_id for result in results for job_id in result[0])
        with queue.db.read() as conn:
            order = list(
                conn.execute(
                    select(TRANSITION.c.job_id)
                    .where(TRANSITION.c.event == "START")
                    .order_by(TRANSITION.c.id)
                ).scalars()
            )
            doubled_starts = conn.execute(
                select(TRANSITION.c.job_id, func.count())
                .where(TRANSITION.c.event == "START")
                .group_by(TRANSITION.c.job_id)
                .having(func.count() > 1)
            ).all()
        queue.db.dispose()
    double_claims = sum(n - 1 for n in claimed.values() if n > 1) + len(doubled_starts)
    overtaken = most_overtaken(order)
    hits = sum(result[1] for result in results)
    print(f"claims_per_s: {len(claimed) / elapsed:.0f}")
    # The claimers' own CPU time (user and system) per claim: what a claim costs whatever
    # else the machine runs (claims_per_s falls with the cores other programs take).
    cpu_ms = 1000 * sum(result[5] for result in results) / max(len(claimed), 1)
    print(f"claimer_cpu_ms_per_claim: {cpu_ms:.2f}")
    server_s = [result[6] for result in results]
    if all(seconds is not None for seconds in server_s):  # PostgreSQL on this machine
        server_ms = 1000 * sum(s for s in server_s if s is not None) / max(len(claimed), 1)
        print(f"server_cpu_ms_per_claim: {server_ms:.2f}")
    print(f"claimed: {len(claimed)} of {args.queued}")
    print(f"double_claims: {double_claims}")
    print(f"held_model_claims: {hits / max(len(claimed), 1):.2f}")
    # A new model's row write goes in the claim's commit unless --separate-rows.
    print(f"worker_row_writes: {sum(result[4] for result in results)} ({row_writes})")
    print(f"max_passed_over: {overtaken} (bound {DEFAULT_BOUND.max_skips})")
    print(f"affinity_bound_held: {'yes' if overtaken <= DEFAULT_BOUND.max_skips else 'NO'}")
    print(f"per_worker: {' '.join(str(len(r[0])) for r in results)}")


if __name__ == "__main__":
    main()
