"""The chaos benchmark's fault injectors, each on the real thing: a small tmpfs, a second
process holding SQLite's lock, SIGSTOP/SIGCONT of a real process, bytes in a real file."""

from __future__ import annotations

import errno
import random
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from benchmarks.chaos_faults import (
    FaultDriver,
    FaultKind,
    FaultRefused,
    check_fillable,
    checkpoint_files,
    damage_file,
    fill_disk,
    free_disk,
    freeze,
    hold_write_lock,
    is_frozen,
    parse_faults,
    release_lock,
    thaw,
)

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
