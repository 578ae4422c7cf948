"""What the launch-time safety net costs: `PRAGMA quick_check` and the rotating backup.

Prints `name: value` lines for a database of N jobs (default 10,000), each with a finished
history (SUBMIT, START, COMPLETE), so the file is the size a long-time user's would be.

    python benchmarks/integrity.py [--jobs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.models.backups import back_up
from app.models.db import check_database
from app.models.opening import open_database

REPEATS = 5


def fill(queue: JobQueue, jobs: int) -> None:
    params = GenerationParams("a lighthouse at dusk, oil on canvas, warm light " * 3, seed=1)
    for start in range(0, jobs, 500):
        queue.submit_many([params] * min(500, jobs - start))
    while (job := queue.claim("bench")) is not None:
        assert job.id is not None
        queue.fire(job.id, JobEvent.COMPLETE, source="bench", worker_id="bench",
                   changes={"output_path": f"/outputs/{job.id:06d}.png"})  # fmt: skip


def median_ms(action: object) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        action()  # type: ignore[operator]
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    jobs = parser.parse_args().jobs
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "easel.db"
        db = open_database(path)
        fill(JobQueue(db), jobs)
        db.trim_journal()
        size_mb = path.stat().st_size / 1e6
        check_ms = median_ms(lambda: check_database(db))
        open_ms = median_ms(lambda: open_database(path).dispose())
        checked_open_ms = median_ms(lambda: open_database(path, check_integrity=True).dispose())
        backup_ms = median_ms(lambda: back_up(db))
        db.dispose()
    print(f"jobs: {jobs}")
    print(f"database_mb: {size_mb:.1f}")
    print(f"quick_check_ms: {check_ms:.1f}")
    print(f"open_ms: {open_ms:.1f}")
    print(f"open_with_quick_check_ms: {checked_open_ms:.1f}")
    print(f"backup_ms: {backup_ms:.1f}")


if __name__ == "__main__":
    main()
