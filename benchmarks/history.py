"""The history's tools on a history of years: search, timeline, stats, recovery, prune, ETA.

Builds (once, cached under /tmp) a database of 100,000 jobs and 1,000,000 history rows
spread over a year, then prints:

    search_ms          a word search (plus a status or date filter), first page, median
    timeline_ms        one job's timeline, median
    stats_ms           `history_stats` for the last month
    recovery_scan_ms   `recovery.recover` at launch after a clean exit (nothing to settle);
                       recovery_settling_20_lost_ms: the same with 20 jobs of dead workers
    prune_s            pruning 50,000 finished jobs (history, then compaction), as the
                       window's automatic prune runs it (Settings "keep at most N")
    prune_gui_max_stall_ms   the event loop's longest gap meanwhile (the prune's own thread)
    db_mb_before/db_mb_after   the file around that prune
    eta_error_p50      |estimate - actual| / actual, replaying the successes in order
    gui_max_stall_ms   the longest the event loop went unserved while typing searches into
                       the job list's search box, each search run off the GUI thread as the window
                       will run it (a 1 ms timer's longest gap, minus its 1 ms)

    .venv/bin/python -m benchmarks.history [--jobs 100000] [--rebuild]  (from the repo root)
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from app.engine.history.auto_prune import prune_by_settings
from app.engine.history.eta import Estimator, Sample
from app.engine.history.search import JobFilter, search
from app.engine.history.stats import history_stats
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy
from app.engine.jobs.states import JobStatus
from app.engine.settings import Settings
from app.engine.workers.recovery import recover
from app.models.migrations import SCHEMA_VERSION
from app.models.opening import open_database

YEAR_S = 365 * 86400
MONTH_S = 30 * 86400
WORDS = ("red", "circle", "blue", "square", "cat", "dog", "castle", "forest", "night", "sea",
         "portrait", "oil", "painting", "sunset", "city", "river", "mountain", "robot")  # fmt: skip
MODELS = {"sd15": 0.02, "sdxl": 0.06, "easel-tiny": 0.004}  # seconds per step at 512x512
SIZES = ((512, 512), (768, 512), (1024, 1024))
DEVICES = {"studio": 1.0, "laptop": 2.5}
LEFT_RUNNING = 20
PRUNED = 50_000
# (event, to_status) of the two kinds of timeline: a plain success, and a hard life that
# ends in success too (paused, out of memory, worker lost, resumed); 10 rows on average.
PLAIN = (("SUBMIT", "PENDING"), ("START", "PROCESSING"), ("COMPLETE", "SUCCESS"))
HARD = (
    ("SUBMIT", "PENDING"), ("START", "PROCESSING"), ("PAUSE", "PAUSING"),
    ("STOPPED", "PAUSED"), ("RESUME", "PENDING"), ("START", "PROCESSING"),
    ("FAIL", "FAILED"), ("RETRY", "PENDING"), ("START", "PROCESSING"),
    ("TIMEOUT", "TIMEOUT"), ("RETRY", "PENDING"), ("START", "PROCESSING"),
    ("PAUSE", "PAUSING"), ("STOPPED", "PAUSED"), ("RESUME", "PENDING"),
    ("START", "PROCESSING"), ("COMPLETE", "SUCCESS"),
)  # fmt: skip
MESSAGES = {"FAIL": "OutOfMemoryError: CUDA out of memory", "COMPLETE": "resumed from step 7"}


def true_seconds(model: str, width: int, height: int, steps: int, device: str) -> float:
    return MODELS[model] * DEVICES[device] * steps * width * height / (512 * 512)


def build(path: Path, jobs: int, seed: int = 15) -> None:
    """Straight into the real schema (made by `open_database`): executemany, big transactions."""
    rng = random.Random(seed)
    open_database(path).dispose()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")
    start = time.time() - YEAR_S
    conn.execute("BEGIN")
    job_rows, history_rows = [], []
    for job_id in range(1, jobs + 1):
        job, history = _job(rng, job_id, start + YEAR_S * job_id / jobs, jobs - job_id)
        job_rows.append(job)
        history_rows += history
        if len(job_rows) == 10_000:
            _flush(conn, job_rows, history_rows)
    _flush(conn, job_rows, history_rows)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _job(rng: random.Random, job_id: int, created: float, from_end: int) -> tuple[tuple, list]:
    model = rng.choice(list(MODELS))
    width, height = rng.choice(SIZES)
    steps = rng.choice((20, 25, 30))
    device = rng.choice(list(DEVICES))
    run_s = true_seconds(model, width, height, steps, device) * rng.lognormvariate(0, 0.08)
    kind = PLAIN if rng.random() < 0.5 else HARD
    running = from_end < LEFT_RUNNING
    events = kind[:2] if running else kind
    history, at = [], created
    for n, (event, status) in enumerate(events):
        at += rng.uniform(1, 30) if status != "SUCCESS" else run_s
        previous = events[n - 1][1] if n else None
        message = MESSAGES.get(event, "") if kind is HARD else ""
        history.append((job_id, 1, previous, status, event, "bench", message, at))
    status = events[-1][1]
    prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))
    started = history[-2][7] if not running else history[-1][7]
    job = (job_id, prompt, "", model, "Euler", steps, 5.0, width, height, 1, status, len(events),
           1, 3, 0, 0, f"{device}:{job_id}:t", at, steps if not running else 3, steps, created,
           at, started, None if running else at, rng.random() < 0.01)  # fmt: skip
    return job, history


def _flush(conn: sqlite3.Connection, job_rows: list, history_rows: list) -> None:
    conn.executemany(
        "INSERT INTO job (id, prompt, negative_prompt, model, scheduler, steps, cfg, width,"
        " height, seed, status, version, attempt, max_attempts, given_up, priority, worker_id,"
        " heartbeat_at, progress_step, progress_total, created_at, updated_at, started_at,"
        " finished_at, starred, init_image, strength) VALUES (" + ", ".join("?" * 25) + ", '', 1)",
        job_rows,
    )
    conn.executemany(
        "INSERT INTO job_transition (job_id, attempt, from_status, to_status, event, source,"
        " message, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        history_rows,
    )
    job_rows.clear()
    history_rows.clear()


def median_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def searches(rng: random.Random, now: float) -> Iterator[JobFilter]:
    while True:
        a, b = rng.sample(WORDS, 2)
        yield rng.choice([
            JobFilter(text=f"{a} {b}"),
            JobFilter(text=f"{a} {b[:3]}*", statuses=frozenset({JobStatus.SUCCESS})),
            JobFilter(text=f"{a} -{b}", since=now - 7 * 86400),
            JobFilter(text=f'"{a} {b}"', model="sdxl"),
        ])  # fmt: skip


def eta_error_p50(queue: JobQueue) -> float:
    """Replay the plain successes in finishing order: estimate each from those before it."""
    with queue.db.read() as conn:
        rows = conn.exec_driver_sql(
            "SELECT model, width, height, steps, worker_id, finished_at - started_at FROM job"
            " WHERE status = 'SUCCESS' AND version = 3 ORDER BY finished_at"
        ).all()
    estimator, errors = Estimator(), list[float]()
    for model, width, height, steps, worker, seconds in rows:
        device = worker.split(":", 1)[0]
        guess = estimator.estimate(model, width, height, steps, device)
        if guess is not None and len(errors) < 20_000:
            errors.append(abs(guess - seconds) / seconds)
        estimator.add(Sample(model, width, height, steps, device, seconds))
    return statistics.median(errors)


class LoopGaps:
    """Times a 1 ms timer's ticks on the GUI thread: a gap beyond 1 ms is the event loop
    stalled (the first ten ticks, while the loop settles, are left out)."""

    def __init__(self) -> None:
        from PySide6.QtCore import QTimer

        self.gaps: list[float] = []
        self._last = time.perf_counter()
        self._timer = QTimer()
        self._timer.setInterval(1)
        self._timer.timeout.connect(self._tick)

    def start(self) -> None:
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def max_stall_ms(self) -> float:
        return max(self.gaps[10:]) * 1000 - 1

    def _tick(self) -> None:
        now = time.perf_counter()
        self.gaps.append(now - self._last)
        self._last = now


def gui_max_stall_ms(queue: JobQueue, rng: random.Random) -> float:
    """Type searches like a person (60-250 ms a key, so some pauses trigger a search)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QTimer
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QLineEdit

    from app.ui.widgets.jobs_panel import SEARCH_DEBOUNCE_MS

    app = QApplication.instance() or QApplication([])
    # The job list's search as the window wires it: a line edit, a search when typing
    # pauses for SEARCH_DEBOUNCE_MS, run on one background thread (the window's DbThread).
    box = QLineEdit()
    box.show()
    pool = ThreadPoolExecutor(1)
    searched: list[Future[object]] = []
    debounce = QTimer()
    debounce.setSingleShot(True)
    debounce.setInterval(SEARCH_DEBOUNCE_MS)
    debounce.timeout.connect(
        lambda: searched.append(pool.submit(search, queue, JobFilter(text=box.text())))
    )
    box.textChanged.connect(debounce.start)
    meter = LoopGaps()
    meter.start()
    for _ in range(6):
        box.clear()
        for char in " ".join(rng.sample(WORDS, 3)):
            QTest.keyClicks(box, char)
            QTest.qWait(rng.randint(60, 250))
    QTest.qWait(300)
    meter.stop()
    pool.shutdown()
    assert searched and app is not None
    return meter.max_stall_ms()


def pruned_in_the_window(queue: JobQueue, keep: int, checkpoints: Path) -> tuple[float, int, float]:
    """The window's automatic prune ("keep at most `keep`" in Settings), on its own thread as
    the window runs it: (seconds until it reported, jobs removed, the event loop's longest
    gap meanwhile, as in `gui_max_stall_ms`)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEventLoop, QObject, QTimer
    from PySide6.QtWidgets import QApplication

    from app.ui.main import GIL_SWITCH_S
    from app.ui.qt.gc_guard import collect_on_gui_thread
    from app.ui.qt.pruning import AutoPruner

    app = QApplication.instance() or QApplication([])
    removed: list[int] = []

    def prune(settings: Settings) -> str:
        # This run's own folder: never the user's checkpoints of jobs with the same ids.
        pruned = prune_by_settings(queue, settings, checkpoints_dir=checkpoints)
        removed.append(pruned.removed if pruned else 0)
        return pruned.line() if pruned else ""

    owner = QObject()
    pruner = AutoPruner(prune, lambda: Settings(keep_finished_jobs=keep), 3600, owner)
    meter = LoopGaps()
    # The window's event loop (`exec` lets other threads run while it waits; QTest.qWait,
    # a Python-side wait, would hold them up), its GIL switch interval, and its garbage
    # collection on the GUI thread (else a collection the prune's allocations start on its
    # thread holds the GIL for tens of milliseconds).
    collector = collect_on_gui_thread()
    loop = QEventLoop()
    finished = QTimer()
    finished.setInterval(5)
    finished.timeout.connect(lambda: loop.quit() if removed else None)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_S)
    meter.start()
    finished.start()
    start = time.perf_counter()
    pruner.start()
    loop.exec()  # until the pass returned, on the prune thread
    seconds = time.perf_counter() - start
    sys.setswitchinterval(switch)
    collector.uninstall()  # the search measurement below runs as it did before
    meter.stop()
    pruner.stop()
    assert app is not None and removed
    return seconds, removed[0], meter.max_stall_ms()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    cached = Path(tempfile.gettempdir()) / f"easel-history-{args.jobs}-v{SCHEMA_VERSION}.db"
    if args.rebuild or not cached.exists():
        cached.unlink(missing_ok=True)
        started = time.perf_counter()
        build(cached, args.jobs)
        print(f"build_s: {time.perf_counter() - started:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder) / "easel.db"
        shutil.copyfile(cached, work)
        measure(work, Path(folder))


def measure(path: Path, folder: Path) -> None:
    rng = random.Random(1)
    queue = JobQueue(open_database(path))
    with queue.db.read() as conn:
        jobs, rows = (conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar_one()
                      for t in ("job", "job_transition"))  # fmt: skip
    print(f"jobs: {jobs}\nhistory_rows: {rows}")
    now = time.time()
    filters = searches(rng, now)
    print(f"search_ms: {median_ms(lambda: search(queue, next(filters)), 50):.1f}")
    print(f"timeline_ms: {median_ms(lambda: queue.timeline(rng.randint(1, jobs)), 200):.2f}")
    print(f"stats_ms: {median_ms(lambda: history_stats(queue, now - MONTH_S, now), 5):.0f}")
    print(f"eta_error_p50: {eta_error_p50(queue):.3f}")
    liveness = folder / "workers"
    liveness.mkdir()
    for name in ("recovery_settling_20_lost_ms", "recovery_scan_ms"):
        # First with 20 jobs left running by dead workers (40 transitions of its own), then
        # the launch after a clean exit: the scan alone.
        start = time.perf_counter()
        recover(queue, liveness_dir=liveness, heartbeat_timeout_s=15, policy=RetryPolicy(), now=now)
        print(f"{name}: {(time.perf_counter() - start) * 1000:.0f}")
    print(f"db_mb_before: {path.stat().st_size / 1e6:.1f}")
    with queue.db.read() as conn:
        finished = conn.exec_driver_sql(
            "SELECT count(*) FROM job WHERE status = 'SUCCESS' AND NOT starred"
        ).scalar_one()
    keep = finished - PRUNED if finished > PRUNED else finished // 2  # --jobs below 100,000
    seconds, removed, stall_ms = pruned_in_the_window(queue, keep, folder / "checkpoints")
    print(f"prune_s: {seconds:.1f}")
    print(f"pruned_jobs: {removed}")
    print(f"prune_gui_max_stall_ms: {stall_ms:.0f}")
    print(f"db_mb_after: {path.stat().st_size / 1e6:.1f}")
    print(f"gui_max_stall_ms: {gui_max_stall_ms(queue, rng):.0f}")
    queue.db.dispose()


if __name__ == "__main__":
    main()
