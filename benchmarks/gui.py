"""Does the window stay responsive with a big queue and jobs running?

    xvfb-run -a .venv/bin/python benchmarks/gui.py [--jobs 10000] [--seconds 15] [--fake-workers]

Seeds a throw-away data folder with `--jobs` finished/failed/cancelled jobs, then starts
the app's window in a fresh process (so `window_shown_s` includes Python start-up and
imports) with two jobs running on real worker processes (the scripted runner: no torch;
`--fake-workers`: a helper process that updates two jobs' progress instead). While the
list scrolls, pages in, switches filters and follows selections, a 10 ms precise QTimer
measures how late the event loop serves it.

Then, with the two jobs still running, it types a prompt key by key (real key events,
about 12 keys a second) and measures the same way.

Prints `window_shown_s` (the window's first paint; goal: 1.0 s), `jobs_listed_s` (its job
list's first rows: the store opened and recovered, the first page read), `max_stall_ms` and
`p99_stall_ms` (goals: 50 ms, 16 ms) and `typing_max_stall_ms`; then, in a fresh window per
language, `min_window_width_px_en` and `min_window_width_px_zh_CN` (the window's
minimumSizeHint; goal: 1280, a laptop's 1366 px screen with room for its frame).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.engine.jobs.queue import JobQueue
    from app.engine.settings import Settings
    from app.engine.workers.supervisor import Supervisor
    from app.testing.scripted_runner import ScriptedRunner
    from app.ui.widgets.window import MainWindow

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TICK_MS = 10
TYPING_S = 5.0
KEY_MS = 80  # about 12 keys a second: a fast typist
RUNNING_PROMPT = "a red circle on a blue background step=0.25"  # 150 steps: 37 s


# --- seeding (parent process) -----------------------------------------------------------------


def seed(home: Path, jobs: int) -> None:
    """`jobs` settled jobs with their history rows, inserted in bulk (set-up, not measured)."""
    from sqlalchemy import insert

    from app.engine.jobs.params import GenerationParams
    from app.engine.jobs.states import JobStatus
    from app.models.opening import open_database
    from app.models.tables import JOB, TRANSITION

    db = open_database(home / "easel.db")
    now = time.time() - jobs * 30
    statuses = [JobStatus.SUCCESS] * 8 + [JobStatus.FAILED, JobStatus.CANCELLED]
    rows, history = [], []
    for i in range(jobs):
        status = statuses[i % len(statuses)]
        at = now + i * 30
        params = GenerationParams(prompt=f"a shape number {i} on a background", seed=i)
        rows.append({
            **params.to_dict(), "id": i + 1, "status": status.value, "version": 2, "attempt": 1,
            "max_attempts": 3, "given_up": status is JobStatus.FAILED, "priority": 0,
            "progress_step": 20 if status is JobStatus.SUCCESS else 7, "progress_total": 20,
            "created_at": at, "updated_at": at + 9, "started_at": at + 0.3, "finished_at": at + 9,
            "error": "RuntimeError: scripted" if status is JobStatus.FAILED else None,
        })  # fmt: skip
        path = (
            (None, "PENDING", "SUBMIT"),
            ("PENDING", "PROCESSING", "START"),
            ("PROCESSING", status.value, "COMPLETE"),
        )
        for k, (a, b, event) in enumerate(path):
            history.append(
                {"job_id": i + 1, "attempt": 1, "from_status": a, "to_status": b,
                 "event": event, "source": "seed", "message": "", "at": at + k}
            )  # fmt: skip
    with db.write() as conn:
        conn.execute(insert(JOB), rows)
        conn.execute(insert(TRANSITION), history)
    db.dispose()


# --- fake workers (helper process) ------------------------------------------------------------


def fake_workers(home: str, seconds: float) -> None:
    """Two jobs always running: progress every 0.1 s each, a new job when one finishes."""
    from app.engine.jobs.params import GenerationParams
    from app.engine.jobs.queue import JobQueue
    from app.engine.jobs.states import JobEvent
    from app.models.opening import open_database

    queue = JobQueue(open_database(Path(home) / "easel.db"))
    held: dict[int, int] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        while len(held) < 2:
            queue.submit(GenerationParams(prompt="a running job", steps=20))
            job = queue.claim("bench-helper")
            assert job is not None and job.id is not None
            held[job.id] = 0
        for job_id in list(held):
            held[job_id] += 1
            queue.report_progress(job_id, "bench-helper", held[job_id], 20)
            if held[job_id] == 20:
                queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id="bench-helper")
                del held[job_id]
        time.sleep(0.1)


# --- the measured window (child process) ------------------------------------------------------


def baseline(seconds: float) -> None:
    """The same 10 ms timer in an empty window: how late the machine alone makes it."""
    from PySide6.QtCore import QElapsedTimer, Qt, QTimer
    from PySide6.QtWidgets import QApplication, QWidget

    qt_app = QApplication(sys.argv[:1])
    widget = QWidget()
    widget.resize(1600, 960)
    widget.show()
    delays: list[float] = []
    clock = QElapsedTimer()
    tick = QTimer()
    tick.setTimerType(Qt.TimerType.PreciseTimer)

    def on_tick() -> None:
        delays.append(max(0.0, clock.nsecsElapsed() / 1e6 - TICK_MS))
        clock.restart()

    def finish() -> None:
        print(json.dumps({"delays": delays[1:]}), flush=True)
        qt_app.quit()

    tick.timeout.connect(on_tick)
    clock.start()
    tick.start(TICK_MS)
    QTimer.singleShot(int(seconds * 1000), finish)
    qt_app.exec()


def min_width(language: str) -> None:
    """The smallest width the window can be given, in `language`, once the models are listed."""
    from PySide6.QtCore import QTimer

    from app.ui.main import launch
    from app.ui.presenters.interfaces import NoWorkers
    from app.ui.qt.language import LANGUAGE_KEY
    from app.ui.qt.window_state import ui_settings

    store = ui_settings()
    store.setValue(LANGUAGE_KEY, language)
    store.sync()
    qt_app, window = launch(sys.argv[:1], make_workers=lambda q, s: (NoWorkers(), None))
    qt_app.aboutToQuit.connect(window.shut_down)
    window.deps.confirm_quit = lambda _running: True

    def measure() -> None:
        hint = window.minimumSizeHint()
        print(json.dumps({"width": hint.width(), "height": hint.height()}), flush=True)
        window.close()

    QTimer.singleShot(2500, measure)  # the store opened, the models listed
    qt_app.exec()


def child(started_at: float, seconds: float, real_workers: bool) -> None:
    from PySide6.QtCore import QElapsedTimer, QEvent, QObject, Qt, QTimer

    from app.engine.jobs.params import GenerationParams
    from app.ui.main import launch
    from app.ui.presenters.interfaces import NoWorkers

    result: dict[str, float] = {}

    class FirstPaint(QObject):
        def eventFilter(self, watched: QObject, event: QEvent) -> bool:
            if event.type() == QEvent.Type.Paint and "shown" not in result:
                result["shown"] = time.time() - started_at
            return False

    # The real start-up path (window first, store and recovery on the database thread);
    # only the workers differ: scripted runners, or none when a helper process fakes them.
    qt_app, window = launch(
        sys.argv[:1],
        make_workers=_scripted_workers if real_workers else lambda q, s: (NoWorkers(), None),
    )
    first_paint = FirstPaint()
    window.installEventFilter(first_paint)

    def listed() -> None:
        if window.vm.jobs.rowCount():
            result["listed"] = time.time() - started_at
        else:
            QTimer.singleShot(10, listed)

    QTimer.singleShot(0, listed)
    window.resize(1600, 960)
    qt_app.aboutToQuit.connect(window.shut_down)
    window.deps.confirm_quit = lambda _running: True  # no question at the end

    delays: list[float] = []
    typing_delays: list[float] = []
    measured = delays  # the list the ticks go to: scrolling first, then typing
    clock = QElapsedTimer()
    tick = QTimer()
    tick.setTimerType(Qt.TimerType.PreciseTimer)

    def on_tick() -> None:
        elapsed = clock.nsecsElapsed() / 1e6
        clock.restart()
        measured.append(max(0.0, elapsed - TICK_MS))

    tick.timeout.connect(on_tick)
    workload = Workload(window)
    typing = Typing(window)

    def submit() -> None:
        if real_workers:
            for _ in range(2):
                window.vm.submit(GenerationParams(prompt=RUNNING_PROMPT, steps=150))
        wait_for_running()

    def wait_for_running() -> None:
        # Measure the steady state: both jobs running, the workers' start-up (imports) over.
        if len(window.deps.queue.running_ids()) >= 2:
            QTimer.singleShot(1000, begin)
        else:
            QTimer.singleShot(200, wait_for_running)

    def begin() -> None:
        clock.start()
        tick.start(TICK_MS)
        workload.start()
        QTimer.singleShot(int(seconds * 1000), type_prompt)

    def type_prompt() -> None:
        nonlocal measured
        workload.stop()
        measured = typing_delays
        typing.start()
        QTimer.singleShot(int(TYPING_S * 1000), finish)

    def finish() -> None:
        tick.stop()
        typing.stop()
        running = window.deps.queue.running_ids()
        if delays:
            delays.pop(0)  # the first interval started before the timer did
        print(json.dumps({"shown": result.get("shown", -1), "listed": result.get("listed", -1),
                          "delays": delays, "typing_delays": typing_delays, "typed": typing.typed,
                          "running": len(running), "rows": window.vm.jobs.rowCount(),
                          "actions": workload.actions}), flush=True)  # fmt: skip
        window.close()

    QTimer.singleShot(1500, submit)  # let the store open and the first page load
    qt_app.exec()


def _scripted_workers(queue: JobQueue, settings: Settings) -> tuple[Supervisor, None]:
    from app.engine.workers.supervisor import Supervisor
    from app.testing.scripted_runner import ScriptedRunner

    factory = niced_scripted_runner if os.environ.get("EASEL_BENCH_NICE") else ScriptedRunner
    supervisor = Supervisor.for_app(
        queue, settings, workers=2, runner_factory=factory, warm_model=None
    )
    return supervisor, None


def niced_scripted_runner() -> ScriptedRunner:
    """The scripted runner in a worker that yields the CPU to the window first."""
    from app.testing.scripted_runner import ScriptedRunner

    os.nice(10)
    return ScriptedRunner()


class Workload:
    """What an impatient user does: scroll, page in more, switch filters, click jobs."""

    def __init__(self, window: MainWindow) -> None:
        from PySide6.QtCore import QTimer

        from app.ui.presenters.rows import ListFilter

        self.window = window
        self.actions = 0
        self.timer = QTimer()
        self.timer.timeout.connect(self.step)
        self.filters = list(ListFilter)

    def start(self) -> None:
        self.timer.start(50)

    def stop(self) -> None:
        self.timer.stop()

    def step(self) -> None:
        self.actions += 1
        table = self.window.jobs.table
        bar = table.verticalScrollBar()
        if self.actions % 60 == 0:  # every 3 s: another filter
            self.window.set_filter(self.filters[(self.actions // 60) % len(self.filters)])
        elif self.actions % 10 == 0:  # every 0.5 s: select a visible job (timeline, image)
            row = table.rowAt(table.viewport().height() // 2)
            if row >= 0:
                table.selectRow(row)
        else:  # scroll, reaching the bottom now and then so more pages load
            bar.setValue(bar.maximum() if self.actions % 25 == 0 else bar.value() + 40)


class Typing:
    """Types a prompt into the prompt box with real key events, one every KEY_MS."""

    TEXT = "a lighthouse on a cliff at dusk, oil painting, dramatic sky, "

    def __init__(self, window: MainWindow) -> None:
        from PySide6.QtCore import QTimer

        self.window = window
        self.typed = 0
        self.timer = QTimer()
        self.timer.timeout.connect(self.step)

    def start(self) -> None:
        self.window.prompt.prompt.setFocus()
        self.timer.start(KEY_MS)

    def stop(self) -> None:
        self.timer.stop()

    def step(self) -> None:
        from PySide6.QtTest import QTest

        QTest.keyClicks(self.window.prompt.prompt, self.TEXT[self.typed % len(self.TEXT)])
        self.typed += 1


# --- the parent: seed, run the child, report --------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--fake-workers", action="store_true")
    parser.add_argument(
        "--baseline", action="store_true", help="also time an empty window, for the machine's noise"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--empty", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--started-at", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--min-width", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.min_width:
            min_width(args.min_width)
        elif args.empty:
            baseline(args.seconds)
        else:
            child(args.started_at, args.seconds, real_workers=not args.fake_workers)
        return 0
    home = Path(tempfile.mkdtemp(prefix="easel-gui-bench-"))
    try:
        return run(args, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(args: argparse.Namespace, home: Path) -> int:
    seed(home, args.jobs)
    env = {**os.environ, "EASEL_HOME": str(home), "PYTHONPATH": str(ROOT)}
    helper = None
    if args.fake_workers:
        script = _HELPER.format(home=str(home), s=args.seconds + 8)
        helper = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT)
    command = [sys.executable, __file__, "--child", "--started-at", str(time.time()),
               "--seconds", str(args.seconds)]  # fmt: skip
    if args.fake_workers:
        command.append("--fake-workers")
    out = subprocess.run(
        command, env=env, cwd=ROOT, capture_output=True, text=True, check=False,
        timeout=args.seconds + 120,
    )  # fmt: skip
    if helper is not None:
        helper.kill()
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        print(out.stdout, out.stderr, file=sys.stderr)
        return 1
    report(json.loads(lines[-1]), args)
    for language in ("en", "zh_CN"):
        print(f"min_window_width_px_{language}: {_min_width(language, env)}")
    if args.baseline:
        empty = subprocess.run(
            [sys.executable, __file__, "--child", "--empty", "--seconds", str(args.seconds)],
            env=env, cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        delays = sorted(json.loads(empty.stdout.splitlines()[-1])["delays"])
        print(f"baseline_max_stall_ms: {delays[-1]:.1f}")
        print(f"baseline_p99_stall_ms: {_p99(delays):.1f}")
    return 0


def _min_width(language: str, env: dict[str, str]) -> int:
    home = Path(tempfile.mkdtemp(prefix="easel-gui-width-"))  # its own window settings
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--min-width", language],
            env={**env, "EASEL_HOME": str(home)}, cwd=ROOT, capture_output=True, text=True,
            check=True, timeout=120,
        )  # fmt: skip
        return int(json.loads(out.stdout.splitlines()[-1])["width"])
    finally:
        shutil.rmtree(home, ignore_errors=True)


_HELPER = "from benchmarks.gui import fake_workers; fake_workers({home!r}, {s})"


def report(data: dict, args: argparse.Namespace) -> None:
    delays = sorted(data["delays"])
    p99 = _p99(delays)
    print(f"jobs: {args.jobs}")
    print(f"workers: {'fake helper process' if args.fake_workers else 'real (scripted runner)'}")
    print(f"running_at_end: {data['running']}")
    print(f"rows_loaded_at_end: {data['rows']}")
    print(f"ticks: {len(delays)}")
    print(f"window_shown_s: {data['shown']:.2f}")
    print(f"jobs_listed_s: {data['listed']:.2f}")
    print(f"max_stall_ms: {delays[-1] if delays else float('nan'):.1f}")
    print(f"p99_stall_ms: {p99:.1f}")
    typing = data["typing_delays"]
    print(f"keys_typed: {data['typed']}")
    print(f"typing_max_stall_ms: {max(typing) if typing else float('nan'):.1f}")


def _p99(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")


if __name__ == "__main__":
    sys.exit(main())
