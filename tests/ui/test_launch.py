"""The real start-up path: window first, then store, recovery, restore banner, workers."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication, QPushButton
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.settings import DB_ENV, Settings, save_settings
from app.engine.store.opening import open_queue
from app.engine.workers import recovery, supervisor
from app.engine.workers.liveness import this_host
from app.engine.workers.recovery import RecoveryReport
from app.testing.step_hooks import png_runner
from app.ui import wiring
from app.ui.main import launch
from app.ui.presenters.interfaces import WorkerPool
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import FakeWorkers
from tests.ui.helpers import job_in, noting

# A hang must fail fast, not stall the whole suite (the suite-wide limit is 10 min).
pytestmark = pytest.mark.timeout(60)

WAIT_MS = 10_000


@pytest.fixture
def restore_process_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """launch() sets process-wide things (excepthook, GIL interval, style): put them back."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    interval = sys.getswitchinterval()
    yield
    sys.setswitchinterval(interval)
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    app.setStyleSheet("")


def test_orphaned_job_is_recovered_announced_and_run(
    qtbot: QtBot, tmp_path: Path, restore_process_state: None
) -> None:
    store = open_queue()  # the user's store in this test's EASEL_HOME
    orphan = job_in(store, JobStatus.PROCESSING, worker=f"{this_host()}:999999:deadbeef0000")
    store.db.dispose()
    pools: list[FakeWorkers] = []

    def workers(queue: JobQueue, settings: Settings) -> tuple[FakeWorkers, None]:
        pools.append(FakeWorkers(queue, tmp_path / "outputs"))
        return pools[-1], None

    _app, window = launch([], make_workers=workers)
    qtbot.addWidget(window)
    try:
        qtbot.waitUntil(window.restore_banner.isVisible, timeout=WAIT_MS)
        assert "1 requeued" in window.restore_banner.label.text()
        qtbot.waitUntil(lambda: bool(pools) and pools[0].started, timeout=WAIT_MS)
        qtbot.waitUntil(
            lambda: (
                (row := window.vm.jobs.job(orphan)) is not None and row.status is JobStatus.SUCCESS
            ),
            timeout=WAIT_MS,
        )
        statuses = [t.to_status for t in window.deps.queue.timeline(orphan)]
        assert JobStatus.TIMEOUT in statuses  # settled through the table before the retry
    finally:
        window.deps.confirm_quit = lambda _n: True
        window.close()


def test_a_launch_recovers_once_and_shows_the_report_of_that_run(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, restore_process_state: None
) -> None:
    store = open_queue()
    orphan = job_in(store, JobStatus.PROCESSING, worker=f"{this_host()}:999999:deadbeef0000")
    store.db.dispose()
    runs: list[RecoveryReport] = []
    real_recover = recovery.recover

    def counted_recover(*args: Any, **kwargs: Any) -> RecoveryReport:
        runs.append(real_recover(*args, **kwargs))
        return runs[-1]

    # Wherever recovery is called from: the launch (through wiring) or a supervisor's start.
    monkeypatch.setattr(recovery, "recover", counted_recover)
    monkeypatch.setattr(supervisor, "recover", counted_recover)

    def the_apps_workers(queue: JobQueue, settings: Settings) -> tuple[WorkerPool, str | None]:
        pool, problem = wiring.make_workers(queue, settings)  # the window's own supervisor
        assert isinstance(pool, supervisor.Supervisor), problem
        pool.config = replace(pool.config, runner_factory=png_runner)  # scripted, no torch
        return pool, problem

    _app, window = launch([], make_workers=the_apps_workers)
    qtbot.addWidget(window)
    try:
        qtbot.waitUntil(
            lambda: (
                (row := window.vm.jobs.job(orphan)) is not None and row.status is JobStatus.SUCCESS
            ),
            timeout=WAIT_MS,
        )  # the workers started and ran the job recovery requeued
        assert len(runs) == 1
        assert runs[0].requeued == [orphan]
        assert "1 requeued" in window.restore_banner.label.text()
        timeouts = [t for t in window.deps.queue.timeline(orphan) if t.event == "TIMEOUT"]
        assert [t.source for t in timeouts] == ["recovery"]
    finally:
        window.deps.confirm_quit = lambda _n: True
        window.close()


def test_a_bug_in_a_slot_is_one_readable_line(
    qtbot: QtBot, make_window: Callable[..., MainWindow], restore_process_state: None
) -> None:
    from app.ui.main import _show_errors_in

    window = make_window()
    _show_errors_in(window)
    try:
        raise ValueError("boom")
    except ValueError as error:
        sys.excepthook(ValueError, error, error.__traceback__)
    assert window.error_banner.isVisible()
    text = window.error_banner.label.text()
    assert text.startswith("Something went wrong: boom") and "Traceback" not in text


def test_an_unreadable_store_is_a_message_and_the_window_stays(
    qtbot: QtBot, easel_home: Path, restore_process_state: None
) -> None:
    easel_home.mkdir(parents=True, exist_ok=True)
    (easel_home / "easel.db").write_bytes(b"this is not a database" * 100)
    _app, window = launch([], make_workers=lambda q, s: pytest.fail("no workers without a store"))
    qtbot.addWidget(window)
    try:
        qtbot.waitUntil(window.error_banner.isVisible, timeout=WAIT_MS)
        text = window.error_banner.label.text()
        assert text.startswith("Easel could not open its job store: The job database")
        assert "is damaged (file is not a database)" in text and "db restore" in text
        assert "Traceback" not in text and window.isVisible()
    finally:
        window.close()


@pytest.mark.parametrize("from_settings", [True, False], ids=["settings", "EASEL_DB"])
def test_a_shared_queue_out_of_reach_says_where_to_change_it(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, restore_process_state: None,
    from_settings: bool,
) -> None:  # fmt: skip
    unreachable = "postgresql://easel@127.0.0.1:9/easel"  # the discard port: nobody answers
    if from_settings:
        save_settings(Settings(database_url=unreachable))
    else:
        monkeypatch.setenv(DB_ENV, unreachable)
    _app, window = launch([], make_workers=lambda q, s: pytest.fail("no workers without a store"))
    qtbot.addWidget(window)
    try:
        qtbot.waitUntil(window.error_banner.isVisible, timeout=WAIT_MS)
        text = window.error_banner.label.text()
        assert "the server at 127.0.0.1:9 cannot be reached" in text
        assert ("shared queue in Settings" in text) is from_settings  # --db: not Settings'
    finally:
        window.close()


def test_a_crash_of_the_last_run_is_told_at_launch_with_its_log(
    qtbot: QtBot, easel_home: Path, restore_process_state: None
) -> None:
    import subprocess
    import textwrap

    from app.engine.crash import SessionGuard

    crashing_run = textwrap.dedent("""
        import ctypes
        from app.engine.crash import SessionGuard
        SessionGuard("gui").open()
        ctypes.string_at(0)  # a segfault in native code, the way a broken driver dies
    """)
    assert subprocess.run([sys.executable, "-c", crashing_run], capture_output=True).returncode
    session = SessionGuard("gui")
    _app, window = launch([], make_workers=lambda q, s: (FakeWorkers(q, easel_home), None),
                          previous_run=session.open())  # fmt: skip
    qtbot.addWidget(window)
    try:
        qtbot.waitUntil(window.restore_banner.isVisible, timeout=WAIT_MS)
        text = window.restore_banner.label.text()
        assert text.startswith("Easel did not close cleanly last time (it crashed).")
        assert "No jobs needed restoring." in text
        buttons = [b.text() for b in window.restore_banner.findChildren(QPushButton)]
        assert "Open log" in buttons
        assert session.previous is not None and session.previous.crash_log is not None
        assert "Segmentation fault" in session.previous.crash_log.read_text()
    finally:
        window.deps.confirm_quit = lambda _n: True
        window.close()
        session.close()


def test_about_names_version_folders_and_the_workers_device(
    make_window: Callable[..., MainWindow],
) -> None:
    from app import __version__
    from app.engine.paths import database_path
    from app.engine.workers.messages import MessageKind, WorkerMessage
    from app.ui.presenters.window_words import about_text

    window = make_window()
    assert "known once a worker is ready" in about_text(window.worker_status.device)
    window.worker_status.handle(WorkerMessage(MessageKind.READY, "w1", device="cpu/float32"))
    text = about_text(window.worker_status.device)
    assert __version__ in text and str(database_path()) in text and "cpu/float32" in text


def test_a_read_only_data_folder_shows_the_jobs_and_changes_nothing(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restore_process_state: None
) -> None:
    from app.engine.jobs.params import GenerationParams
    from tests.faults import read_only_view
    from tests.ui.test_window import status_of

    home = tmp_path / "home"
    queue = open_queue(home / "easel.db")
    [job_id] = queue.submit_many([GenerationParams("a lighthouse")])
    queue.db.dispose()
    with read_only_view(home, tmp_path / "ro") as view:
        monkeypatch.setenv("EASEL_HOME", str(view))
        _app, window = launch([], make_workers=lambda q, s: pytest.fail("no workers read-only"))
        qtbot.addWidget(window)
        try:
            qtbot.waitUntil(window.error_banner.isVisible, timeout=WAIT_MS)
            text = window.error_banner.label.text()
            assert text.startswith(f"The data folder {view} is read-only")
            qtbot.waitUntil(lambda: status_of(window, job_id) is JobStatus.PENDING, timeout=WAIT_MS)
        finally:
            window.close()


def test_a_launch_prunes_as_the_settings_say_and_keeps_what_must_stay(
    qtbot: QtBot, tmp_path: Path, restore_process_state: None
) -> None:
    from app.engine.settings import save_settings
    from tests.engine.history.conftest import old_and_kept_jobs

    save_settings(Settings(keep_finished_days=30))
    store = open_queue()
    old, keepers = old_and_kept_jobs(JobQueue(store.db, clock=lambda: 1_000.0), 4)
    store.db.dispose()
    _app, window = launch([], make_workers=lambda q, s: (FakeWorkers(q, tmp_path), None))
    qtbot.addWidget(window)
    try:
        qtbot.waitUntil(
            noting(window, "Removed 4 finished jobs older than 30 days; freed "), timeout=WAIT_MS
        )
        left = {job.id for job in window.deps.queue.queue.jobs(limit=None)}
        # Starred, paused, failed (recovery retried it; the fake worker may have run it since).
        assert left == set(keepers.values()) and not left & set(old)
    finally:
        window.deps.confirm_quit = lambda _n: True
        window.close()


def test_a_launch_under_a_write_lock_held_elsewhere_says_so_then_recovers(
    qtbot: QtBot, easel_home: Path, monkeypatch: pytest.MonkeyPatch, restore_process_state: None
) -> None:
    import threading

    from app.engine.paths import database_path
    from app.engine.store import opening
    from tests.faults import release, write_lock_held

    monkeypatch.setattr(opening, "LOCK_TIMEOUT_S", 0.5)  # find the lock fast, not in 10 s

    store = open_queue()
    orphan = job_in(store, JobStatus.PROCESSING, worker=f"{this_host()}:999999:deadbeef0000")
    store.db.dispose()
    pools: list[FakeWorkers] = []

    def workers(queue: JobQueue, settings: Settings) -> tuple[FakeWorkers, None]:
        pools.append(FakeWorkers(queue, easel_home / "outputs"))
        return pools[-1], None

    with write_lock_held(database_path()) as holder:
        _app, window = launch([], make_workers=workers)
        qtbot.addWidget(window)
        try:
            qtbot.waitUntil(window.error_banner.isVisible, timeout=WAIT_MS * 2)
            text = window.error_banner.label.text()
            assert "Another program holds the job database's write lock" in text
            assert not pools  # no worker runs beside jobs nobody has settled yet
            assert not window.restore_banner.isVisible()
            threading.Timer(0.5, release, [holder]).start()
            qtbot.waitUntil(window.restore_banner.isVisible, timeout=WAIT_MS * 2)
            assert "1 requeued" in window.restore_banner.label.text()
            assert not window.error_banner.isVisible()  # the wait is over: its line goes
            qtbot.waitUntil(lambda: bool(pools) and pools[0].started, timeout=WAIT_MS)
            statuses = [t.to_status for t in window.deps.queue.timeline(orphan)]
            assert JobStatus.TIMEOUT in statuses
        finally:
            window.deps.confirm_quit = lambda _n: True
            window.close()


def test_a_launch_on_a_full_disk_waits_off_the_gui_thread_then_recovers(
    qtbot: QtBot,
    tmp_path: Path,
    easel_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    restore_process_state: None,
) -> None:
    """Issue 41.5: a store error that passes (here a real full disk under the job database)
    met by launch recovery was "Could not check the last session's jobs", and the workers
    started beside jobs nobody had settled. Now the window says it waits, waits on the
    database thread as `recover` on the command line does (the GUI thread runs on), and
    recovers once there is room, before any worker starts."""
    from PySide6.QtCore import QTimer

    from tests.faults import fill_disk, small_disk

    with small_disk(tmp_path / "disk", "4m") as disk:
        database = disk / "easel.db"
        monkeypatch.setenv(DB_ENV, str(database))
        store = open_queue(database)  # kept open: the journal files stay as they are
        orphan = job_in(store, JobStatus.PROCESSING, worker=f"{this_host()}:999999:deadbeef0000")
        filler = fill_disk(disk)
        pools: list[FakeWorkers] = []

        def workers(queue: JobQueue, settings: Settings) -> tuple[FakeWorkers, None]:
            pools.append(FakeWorkers(queue, easel_home / "outputs"))
            return pools[-1], None

        _app, window = launch([], make_workers=workers)
        qtbot.addWidget(window)
        ticks: list[int] = []
        timer = QTimer()
        timer.timeout.connect(lambda: ticks.append(1))
        try:
            qtbot.waitUntil(window.error_banner.isVisible, timeout=WAIT_MS * 2)
            text = window.error_banner.label.text()
            assert "cannot write its job store for now" in text, text
            assert "Could not check" not in text
            timer.start(50)
            qtbot.wait(1500)  # still waiting: nothing settled, no worker, the GUI thread free
            timer.stop()
            assert len(ticks) >= 10, len(ticks)
            assert not pools and not window.restore_banner.isVisible()
            assert store.get(orphan).status == JobStatus.PROCESSING
            filler.unlink()  # room again
            qtbot.waitUntil(window.restore_banner.isVisible, timeout=WAIT_MS * 2)
            assert "1 requeued" in window.restore_banner.label.text()
            assert not window.error_banner.isVisible()  # the wait is over: its line goes
            qtbot.waitUntil(lambda: bool(pools) and pools[0].started, timeout=WAIT_MS)
            statuses = [t.to_status for t in window.deps.queue.timeline(orphan)]
            assert JobStatus.TIMEOUT in statuses
        finally:
            window.deps.confirm_quit = lambda _n: True
            window.close()
            store.db.dispose()
