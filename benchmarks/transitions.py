"""Transitions per second through `JobQueue.fire`, against the bare driver doing the same work.

Both sides do, per transition, one write transaction (SQLite: BEGIN IMMEDIATE) holding: read
the job's status and version, the conditional UPDATE on (id, status, version), and the
history INSERT, on the same schema (SQLite: a WAL file with the same pragmas).
`ratio_vs_raw` is the share of the physical limit that the queue's code keeps.

    .venv/bin/python benchmarks/transitions.py [--transitions 2000] [--rounds 5] [--db URL]
        [--synchronous NORMAL]

`--db postgresql://...`: the same on PostgreSQL (raw side: plain psycopg), in scratch
schemas dropped afterwards; prints `raw_postgres_per_s` instead of `raw_sqlite_per_s`.
`--synchronous NORMAL`: SQLite commits as before issue 34 (not durable against a power cut),
to see what FULL costs (`benchmarks/security.py` prints both).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.models.database_urls import parse_url
from app.models.db import BUSY_TIMEOUT_MS, SYNCHRONOUS_ENV, sqlite_synchronous
from app.models.opening import open_database
from app.models.postgres import scratch_schema

JOBS = 100
# PENDING -> PAUSED -> PENDING -> ...: a legal walk that never ends.
EVENTS = (JobEvent.PAUSE, JobEvent.RESUME)
NEXT = {"PENDING": ("PAUSED", "PAUSE"), "PAUSED": ("PENDING", "RESUME")}


def queue_side(location: str) -> Callable[[int], float]:
    queue = JobQueue(open_database(location))
    ids = [queue.submit(GenerationParams("a red circle", seed=1)) for _ in range(JOBS)]
    done = 0

    def run(transitions: int) -> float:
        nonlocal done
        start = time.perf_counter()
        for i in range(done, done + transitions):
            queue.fire(ids[i % JOBS], EVENTS[(i // JOBS) % 2], source="bench")
        done += transitions
        return transitions / (time.perf_counter() - start)

    return run


def raw_side(location: str) -> Callable[[int], float]:
    # Same schema (made by the app), plain driver: no ORM, no Core.
    queue = JobQueue(open_database(location))
    ids = [queue.submit(GenerationParams("a red circle", seed=1)) for _ in range(JOBS)]
    postgres = not queue.db.is_sqlite
    queue.db.dispose()
    conn = raw_postgres(location) if postgres else raw_sqlite(location)
    done = 0

    def run(transitions: int) -> float:
        nonlocal done
        start = time.perf_counter()
        for i in range(done, done + transitions):
            raw_transition(conn, ids[i % JOBS], postgres=postgres)
        done += transitions
        return transitions / (time.perf_counter() - start)

    return run


def raw_sqlite(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    synchronous = f"synchronous={sqlite_synchronous()}"  # the queue's own, FULL unless asked
    for pragma in ("journal_mode=WAL", synchronous, f"busy_timeout={BUSY_TIMEOUT_MS}"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def raw_postgres(location: str) -> Any:
    import psycopg

    url = parse_url(location)
    options = url.query.get("options")
    return psycopg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password,
        dbname=url.database, options=options if isinstance(options, str) else None,
    )  # fmt: skip


def raw_transition(conn: Any, job_id: int, *, postgres: bool) -> None:
    """One transition by hand; psycopg starts the transaction at the first statement."""
    mark = "%s" if postgres else "?"
    if not postgres:
        conn.execute("BEGIN IMMEDIATE")
    status, version, attempt = conn.execute(
        f"SELECT status, version, attempt FROM job WHERE id = {mark}", (job_id,)
    ).fetchone()
    to_status, event = NEXT[status]
    now = time.time()
    updated = conn.execute(
        f"UPDATE job SET status = {mark}, version = {mark}, updated_at = {mark} "
        f"WHERE id = {mark} AND status = {mark} AND version = {mark}",
        (to_status, version + 1, now, job_id, status, version),
    ).rowcount
    assert updated == 1
    conn.execute(
        "INSERT INTO job_transition (job_id, attempt, from_status, to_status, event, source,"
        f" message, at) VALUES ({', '.join([mark] * 8)})",
        (job_id, attempt, status, to_status, event, "bench", "", now),
    )
    if postgres:
        conn.commit()
    else:
        conn.execute("COMMIT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=2000, help="per round and side")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--db", metavar="URL", help="a PostgreSQL URL (default: a SQLite file)")
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL",
                        help="SQLite's commit level (NORMAL: only to compare)")  # fmt: skip
    args = parser.parse_args()
    os.environ[SYNCHRONOUS_ENV] = args.synchronous
    with ExitStack() as stores:
        if args.db:
            raw_at, ours_at = (stores.enter_context(scratch_schema(args.db)) for _ in "ab")
        else:
            folder = Path(stores.enter_context(tempfile.TemporaryDirectory(prefix="easel-")))
            raw_at, ours_at = str(folder / "raw.db"), str(folder / "queue.db")
        raw, ours = raw_side(raw_at), queue_side(ours_at)
        # Alternate rounds so both sides see the same background load; report medians.
        raw_rates, our_rates = [], []
        for _ in range(args.rounds):
            raw_rates.append(raw(args.transitions))
            our_rates.append(ours(args.transitions))
    raw_rate, our_rate = statistics.median(raw_rates), statistics.median(our_rates)
    print(f"transitions_per_s: {our_rate:.0f}")
    print(f"raw_{'postgres' if args.db else 'sqlite'}_per_s: {raw_rate:.0f}")
    print(f"ratio_vs_raw: {our_rate / raw_rate:.2f}")


if __name__ == "__main__":
    main()
