"""Transitions per second through `JobQueue.fire`, against plain sqlite3 doing the same work.

Both sides do, per transition, one write transaction (BEGIN IMMEDIATE) holding: read the
job's status and version, the conditional UPDATE on (id, status, version), and the
history INSERT, on a WAL file with the same pragmas. `ratio_vs_raw` is the share of the
physical limit that the queue's code keeps.

    .venv/bin/python benchmarks/transitions.py [--transitions 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from app.engine.params import GenerationParams
from app.engine.queue import JobQueue
from app.engine.states import JobEvent
from app.models.db import BUSY_TIMEOUT_MS, open_database

JOBS = 100
# PENDING -> PAUSED -> PENDING -> ...: a legal walk that never ends.
EVENTS = (JobEvent.PAUSE, JobEvent.RESUME)
NEXT = {"PENDING": ("PAUSED", "PAUSE"), "PAUSED": ("PENDING", "RESUME")}


def queue_side(folder: Path) -> Callable[[int], float]:
    queue = JobQueue(open_database(folder / "queue.db"))
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


def raw_side(folder: Path) -> Callable[[int], float]:
    # Same schema (made by the app), same pragmas, plain sqlite3: no ORM, no Core.
    queue = JobQueue(open_database(folder / "raw.db"))
    ids = [queue.submit(GenerationParams("a red circle", seed=1)) for _ in range(JOBS)]
    queue.db.dispose()
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", f"busy_timeout={BUSY_TIMEOUT_MS}"):
        conn.execute(f"PRAGMA {pragma}")
    done = 0

    def run(transitions: int) -> float:
        nonlocal done
        start = time.perf_counter()
        for i in range(done, done + transitions):
            raw_transition(conn, ids[i % JOBS])
        done += transitions
        return transitions / (time.perf_counter() - start)

    return run


def raw_transition(conn: sqlite3.Connection, job_id: int) -> None:
    conn.execute("BEGIN IMMEDIATE")
    status, version, attempt = conn.execute(
        "SELECT status, version, attempt FROM job WHERE id = ?", (job_id,)
    ).fetchone()
    to_status, event = NEXT[status]
    now = time.time()
    updated = conn.execute(
        "UPDATE job SET status = ?, version = ?, updated_at = ? "
        "WHERE id = ? AND status = ? AND version = ?",
        (to_status, version + 1, now, job_id, status, version),
    ).rowcount
    assert updated == 1
    conn.execute(
        "INSERT INTO job_transition (job_id, attempt, from_status, to_status, event, source,"
        " message, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (job_id, attempt, status, to_status, event, "bench", "", now),
    )
    conn.execute("COMMIT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=2000, help="per round and side")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="easel-bench-") as tmp:
        folder = Path(tmp)
        raw, ours = raw_side(folder), queue_side(folder)
        # Alternate rounds so both sides see the same background load; report medians.
        raw_rates, our_rates = [], []
        for _ in range(args.rounds):
            raw_rates.append(raw(args.transitions))
            our_rates.append(ours(args.transitions))
    raw_rate, our_rate = statistics.median(raw_rates), statistics.median(our_rates)
    print(f"transitions_per_s: {our_rate:.0f}")
    print(f"raw_sqlite_per_s: {raw_rate:.0f}")
    print(f"ratio_vs_raw: {our_rate / raw_rate:.2f}")


if __name__ == "__main__":
    main()
