"""The chaos benchmark's fault injectors, each on the real thing: a small tmpfs, a second
process holding SQLite's lock, SIGSTOP/SIGCONT of a real process, bytes in a real file."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy

from app.engine.generation.outcome import StepDecision, StepProgress
from app.engine.jobs.params import GenerationParams
from app.engine.workers.job_run import LostJob
from app.testing.ledger import LedgerRunner, Mark, read_ledger
from app.testing.scripted_runner import ScriptedRunner
from benchmarks.chaos_faults import (
    BUSY_LOOPS,
    Contention,
    DriverHooks,
    FaultDriver,
    FaultKind,
    FaultRefused,
    back_up_database,
    check_combination,
    check_fillable,
    checkpoint_files,
    damage_file,
    fill_disk,
    free_disk,
    freeze,
    hold_write_lock,
    is_frozen,
    lift_stall,
    parse_faults,
    release_lock,
    replace_database,
    skewed_environment,
    stall,
    thaw,
)
from benchmarks.chaos_server import SUITE_PORT, NoServer, PrivateServer

REPO = Path(__file__).resolve().parents[2]

WAIT_S = 30.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_fault_kinds_are_parsed_and_unknown_ones_named() -> None:
    assert parse_faults("disk, stop") == {FaultKind.DISK, FaultKind.STOP}
    assert parse_faults("") == frozenset()
    with pytest.raises(ValueError, match=r"unknown fault kind.*flood.*known: disk"):
        parse_faults("lock,flood")


# --- disk full -------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs (needs root, as the disk fault itself does)."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_refuses_writes_until_the_ballast_goes(small_disk: Path) -> None:
    ballast = fill_disk(small_disk)
    with pytest.raises(OSError) as full:
        (small_disk / "image.png").write_bytes(b"x" * 65536)
    assert full.value.errno == errno.ENOSPC

    free_disk(ballast)
    (small_disk / "image.png").write_bytes(b"x" * 65536)
    assert not ballast.exists()


def test_a_disk_too_large_to_fill_safely_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FaultRefused, match=r"too large to fill safely.*tmpfs"):
        check_fillable(tmp_path, max_bytes=1024)
    check_fillable(tmp_path, max_bytes=2**62)  # any disk is small enough for this limit


# --- a long write lock -----------------------------------------------------------------------


def try_write(db_path: Path) -> bool:
    conn = sqlite3.connect(db_path, timeout=0.1, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError as error:
        assert "locked" in str(error)
        return False
    finally:
        conn.close()


def test_another_process_holds_the_write_lock_until_released(tmp_path: Path) -> None:
    db_path = tmp_path / "easel.db"
    with sqlite3.connect(db_path) as conn:
        conn.execute("CREATE TABLE job (id INTEGER PRIMARY KEY)")
    holder = hold_write_lock(db_path, seconds=120)
    try:
        assert not try_write(db_path)
        with sqlite3.connect(db_path) as reader:
            assert reader.execute("SELECT count(*) FROM job").fetchone() == (0,)  # reads work
    finally:
        release_lock(holder)
    assert try_write(db_path)


def test_the_lock_ends_by_itself(tmp_path: Path) -> None:
    db_path = tmp_path / "easel.db"
    sqlite3.connect(db_path).close()
    holder = hold_write_lock(db_path, seconds=0.2)
    assert holder.wait(timeout=WAIT_S) == 0
    release_lock(holder)
    assert try_write(db_path)


# --- a frozen worker -------------------------------------------------------------------------


def test_freeze_stops_a_process_and_thaw_lets_it_go_on() -> None:
    process = subprocess.Popen(["sleep", "60"])
    try:
        freeze(process.pid)
        wait_until(lambda: is_frozen(process.pid), "the process to stop")
        thaw(process.pid)
        wait_until(lambda: not is_frozen(process.pid), "the process to continue")
    finally:
        process.kill()
        process.wait()


# --- a damaged checkpoint --------------------------------------------------------------------


def test_damage_overwrites_4_kb_in_place(tmp_path: Path) -> None:
    path = tmp_path / "job-1.ckpt"
    original = bytes(range(256)) * 400  # 100 KB
    path.write_bytes(original)

    assert damage_file(path, random.Random(3))

    damaged = path.read_bytes()
    changed = [i for i, (a, b) in enumerate(zip(original, damaged, strict=True)) if a != b]
    assert len(damaged) == len(original)
    assert changed and changed[-1] - changed[0] < 4096


def test_a_small_checkpoint_is_damaged_too_and_a_missing_one_is_said(tmp_path: Path) -> None:
    path = tmp_path / "job-2.ckpt"
    path.write_bytes(b'{"step": 3}')
    assert damage_file(path, random.Random(1))
    assert path.read_bytes() != b'{"step": 3}'
    assert not damage_file(tmp_path / "gone.ckpt", random.Random(1))


def test_checkpoint_files_leave_out_half_written_ones(tmp_path: Path) -> None:
    (tmp_path / "job-1.ckpt").write_bytes(b"a")
    (tmp_path / "job-2.ckpt.tmp").write_bytes(b"b")
    assert checkpoint_files(tmp_path) == [tmp_path / "job-1.ckpt"]
    assert checkpoint_files(tmp_path / "none") == []


# --- the schedule ----------------------------------------------------------------------------


def test_the_driver_injects_each_kind_once_at_a_time_and_undoes_when_due(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").mkdir()
    checkpoint = tmp_path / "checkpoints" / "job-1.ckpt"
    checkpoint.write_bytes(b"\0" * 10_000)
    worker = subprocess.Popen(["sleep", "60"])
    now = [100.0]
    driver = FaultDriver(
        frozenset({FaultKind.STOP, FaultKind.CKPT}), random.Random(5), tmp_path,
        worker_pid=lambda: worker.pid, still_alive=lambda pid: pid == worker.pid,
        stop_s=(2.0, 2.0), clock=lambda: now[0],
    )  # fmt: skip
    try:
        assert {driver.inject_one(), driver.inject_one()} == {FaultKind.STOP, FaultKind.CKPT}
        assert driver.inject_one() is FaultKind.CKPT  # the stop is still in place
        assert checkpoint.read_bytes() != b"\0" * 10_000
        wait_until(lambda: is_frozen(worker.pid), "the worker to stop")
        assert driver.active() == {FaultKind.STOP}

        now[0] += 1.0
        driver.undo_due()
        assert is_frozen(worker.pid)  # not due yet
        now[0] += 1.5
        driver.undo_due()
        wait_until(lambda: not is_frozen(worker.pid), "the worker to continue")
        assert driver.active() == set()
        assert driver.injected == {FaultKind.STOP: 1, FaultKind.CKPT: 2}
    finally:
        worker.kill()
        worker.wait()


def test_nothing_to_freeze_or_damage_injects_nothing(tmp_path: Path) -> None:
    driver = FaultDriver(
        frozenset({FaultKind.STOP, FaultKind.CKPT}), random.Random(1), tmp_path,
        worker_pid=lambda: None, still_alive=lambda pid: False,
    )  # fmt: skip
    assert [driver.inject_one() for _ in range(4)] == [None] * 4
    assert not driver.injected


def test_undo_all_releases_a_lock_at_once(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "easel.db").close()
    driver = FaultDriver(
        frozenset({FaultKind.LOCK}), random.Random(1), tmp_path,
        worker_pid=lambda: None, still_alive=lambda pid: False, lock_s=300,
    )  # fmt: skip
    assert driver.inject_one() is FaultKind.LOCK
    assert not try_write(tmp_path / "easel.db")
    driver.undo_all()
    assert try_write(tmp_path / "easel.db")


# --- the faults of issue 21 ------------------------------------------------------------------


def ledger_run(
    runner: LedgerRunner, tmp_path: Path, on_step: Callable[[StepProgress], StepDecision]
) -> None:
    params = GenerationParams("a cat step=0.02", model="fake", steps=30, seed=3)
    runner.run(
        params, output_path=tmp_path / "000007-3.png",
        checkpoint_path=tmp_path / "job-7-a2-c5.ckpt", on_step=on_step,
    )  # fmt: skip


def go_on(progress: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


def test_a_stall_freezes_the_step_of_the_run_that_takes_it_until_lifted(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    asked = stall(ledger, 7)
    runner = LedgerRunner(ScriptedRunner(), ledger)
    thread = threading.Thread(target=ledger_run, args=(runner, tmp_path, go_on))
    thread.start()
    wait_until(lambda: Mark.STALLED in [e.what for e in read_ledger(ledger)], "the stall")
    frozen_at = len(read_ledger(ledger))
    assert not asked.exists()  # taken by this run: a retry of the job would not freeze
    time.sleep(0.3)  # fifteen steps' time
    assert len(read_ledger(ledger)) == frozen_at and thread.is_alive()

    lift_stall(asked)
    thread.join(WAIT_S)
    first = read_ledger(ledger)
    assert first[-1].what is Mark.COMPLETED and [e.step for e in first if e.step][-1] == 30
    assert (first[0].attempt, first[0].image) == (2, "000007-3.png")
    # The stall was that run's: the next run of the job is not frozen by it.
    (tmp_path / "000007-3.png").unlink()
    ledger_run(runner, tmp_path, go_on)
    assert [e.what for e in read_ledger(ledger)].count(Mark.STALLED) == 1


def test_a_run_that_finds_its_job_taken_ends_lost_and_one_that_raises_says_so(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    runner = LedgerRunner(ScriptedRunner(), ledger)

    def taken(progress: StepProgress) -> StepDecision:
        raise LostJob(7)

    def broken(progress: StepProgress) -> StepDecision:
        raise RuntimeError("the database went away")

    with pytest.raises(LostJob):
        ledger_run(runner, tmp_path, taken)
    with pytest.raises(RuntimeError):
        ledger_run(runner, tmp_path, broken)
    ends = [e.what for e in read_ledger(ledger) if e.what not in (Mark.START, Mark.STEP)]
    assert ends == [Mark.LOST, Mark.RAISED]


SKEW_PROBE = """
import json, multiprocessing, threading, time
from app.testing.ledger import true_time

def clocks(results):
    results.put([time.time(), time.monotonic(), true_time()])

if __name__ == "__main__":
    time.sleep(0.01)  # both failed under libfaketime: EINVAL, and a wait as long as the skew
    threading.Event().wait(0.01)
    results = multiprocessing.get_context("spawn").Queue()
    child = multiprocessing.get_context("spawn").Process(target=clocks, args=(results,))
    child.start()
    clocks(results)
    print(json.dumps([results.get(timeout=60), results.get(timeout=60)]))
    child.join()
"""


def test_a_skewed_process_and_its_workers_have_the_clock_off_monotonic_and_ledger_true(
    tmp_path: Path,
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(SKEW_PROBE)
    environment = os.environ | skewed_environment(-600.0)
    environment["PYTHONPATH"] += os.pathsep + str(REPO)
    before_wall, before_mono = time.time(), time.monotonic()
    child = subprocess.run(
        [sys.executable, str(probe)], capture_output=True, text=True, check=True,
        env=environment, timeout=120,
    )  # fmt: skip
    for wall, mono, true in json.loads(child.stdout):  # the process, and a worker it spawned
        assert wall == pytest.approx(before_wall - 600, abs=30)
        assert mono == pytest.approx(before_mono, abs=30)  # waits and timeouts stay right
        assert true == pytest.approx(before_wall, abs=30)


def test_a_replaced_database_is_the_backup_for_new_connections_only(tmp_path: Path) -> None:
    db_path = tmp_path / "easel.db"
    live = sqlite3.connect(db_path, isolation_level=None)
    live.execute("PRAGMA journal_mode=WAL")
    live.execute("CREATE TABLE job (id INTEGER PRIMARY KEY)")
    live.execute("INSERT INTO job VALUES (1)")
    backup = back_up_database(db_path, tmp_path / "backup.db")
    live.execute("INSERT INTO job VALUES (2)")

    set_aside = replace_database(db_path, backup)

    live.execute("INSERT INTO job VALUES (3)")  # a running worker: on the old file still
    assert live.execute("SELECT count(*) FROM job").fetchone() == (3,)
    with contextlib.closing(sqlite3.connect(db_path)) as fresh:  # a new command
        assert fresh.execute("SELECT id FROM job").fetchall() == [(1,)]
    assert set_aside.exists() and set_aside.name.startswith("easel.db.replaced-")
    live.close()


def test_faults_for_another_store_or_measured_together_wrongly_are_refused() -> None:
    check_combination(frozenset({FaultKind.SKEW, FaultKind.DB_OUTAGE, FaultKind.STOP}))
    check_combination(frozenset({FaultKind.REPLACE_DB, FaultKind.STALL, FaultKind.DISK}))
    with pytest.raises(FaultRefused, match="need a PostgreSQL queue"):
        check_combination(frozenset({FaultKind.DB_OUTAGE, FaultKind.REPLACE_DB}))
    with pytest.raises(FaultRefused, match="skew and stall"):
        check_combination(frozenset({FaultKind.SKEW, FaultKind.STALL}))
    assert parse_faults("skew,stall,db-outage,replace-db") == {
        FaultKind.SKEW, FaultKind.STALL, FaultKind.DB_OUTAGE, FaultKind.REPLACE_DB,
    }  # fmt: skip


def test_the_driver_records_when_the_store_was_out(tmp_path: Path) -> None:
    server = FakeServer()
    now, wall = [0.0], [1000.0]
    driver = FaultDriver(
        frozenset({FaultKind.DB_OUTAGE}), random.Random(2), tmp_path,
        worker_pid=lambda: None, still_alive=lambda pid: False, clock=lambda: now[0],
        wall_clock=lambda: wall[0], hooks=DriverHooks(server=server), outage_s=(6.0, 6.0),
    )  # fmt: skip
    assert driver.inject_one() is FaultKind.DB_OUTAGE
    assert server.calls == ["stop"] and driver.outages == []
    now[0], wall[0] = 6.5, 1006.5
    driver.undo_due()
    assert server.calls == ["stop", "start"]
    assert driver.outages == [(1000.0, 1006.5)]


class FakeServer:
    """Stands in for the server in the schedule's own test (the real one is tested below)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def stop(self) -> None:
        self.calls.append("stop")

    def start(self) -> str:
        self.calls.append("start")
        return "postgresql+psycopg://"


def test_the_private_server_stops_and_starts_and_is_never_the_suite_s() -> None:
    with pytest.raises(ValueError, match="test suite's server"):
        PrivateServer(port=SUITE_PORT)
    server = PrivateServer(port=54349)
    try:
        url = server.start()
    except NoServer as missing:
        if "not installed" in str(missing):
            pytest.skip(str(missing))
        raise
    try:
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
        assert can_query(engine)
        server.stop()
        assert not can_query(engine)
        server.start()
        assert can_query(engine)
    finally:
        server.remove()
    assert not server.folder.exists()


def can_query(engine: sqlalchemy.Engine) -> bool:
    try:
        with engine.connect() as conn:
            return conn.execute(sqlalchemy.text("SELECT 1")).scalar() == 1
    except sqlalchemy.exc.OperationalError:
        return False


# --- a busy machine (issue 41) ---------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pinning needs Linux")
def test_contention_pins_and_stops_the_healthy_workers_and_undoes_it_all() -> None:
    healthy, planted = (
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in "ab"
    )
    everywhere = os.sched_getaffinity(0)
    try:
        contention = Contention(
            lambda: [(healthy.pid, False), (planted.pid, True)], random.Random(1)
        )
        deadline = time.monotonic() + 10
        while not is_frozen(healthy.pid):  # the first burst stops it at once
            assert time.monotonic() < deadline, "the healthy worker was never stopped"
            time.sleep(0.01)
        assert not is_frozen(planted.pid)  # the hang's worker is spared the bursts
        core = os.sched_getaffinity(healthy.pid)
        assert len(core) == 1 and os.sched_getaffinity(planted.pid) == core
        loops = contention._loops
        assert len(loops) == BUSY_LOOPS and all(os.sched_getaffinity(p.pid) == core for p in loops)
        contention.end()
        assert not is_frozen(healthy.pid)
        assert os.sched_getaffinity(healthy.pid) == everywhere
        assert all(loop.poll() is not None for loop in loops)
    finally:
        for child in (healthy, planted):
            child.kill()
            child.wait()
