"""Fault injectors for the chaos benchmark (issue 10): each puts a fault in place, now.

    disk   the data folder's disk is full (a ballast file takes every free byte)
    lock   another process holds SQLite's write lock (BEGIN IMMEDIATE) for a while
    stop   a worker is frozen with SIGSTOP, and thawed with SIGCONT later
    ckpt   a checkpoint file gets 4 KB of random bytes in its middle

Each injector returns what undoes it, and `FaultDriver` schedules the undo, so that the
chaos driver can, whatever happens, run every pending undo at the end.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

BALLAST = "chaos-ballast.bin"
# Never fill a real disk: the disk fault runs only on a filesystem this small (a tmpfs).
MAX_FILL_BYTES = 2 * 1024**3
DAMAGE_BYTES = 4096
_CHUNK = 1024 * 1024


class FaultKind(StrEnum):
    DISK = "disk"
    LOCK = "lock"
    STOP = "stop"
    CKPT = "ckpt"


class FaultRefused(Exception):
    """A fault that cannot be put in place safely here; the message says what to do."""


def parse_faults(text: str) -> frozenset[FaultKind]:
    """`"disk,lock"` -> {DISK, LOCK}; one sentence naming the unknown kinds otherwise."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in {kind.value for kind in FaultKind}]
    if unknown:
        known = ", ".join(kind.value for kind in FaultKind)
        raise ValueError(f"unknown fault kind(s) {', '.join(unknown)}; known: {known}")
    return frozenset(FaultKind(name) for name in names)


# --- disk full -------------------------------------------------------------------------------


def check_fillable(folder: Path, max_bytes: int = MAX_FILL_BYTES) -> None:
    """Refuse a filesystem larger than `max_bytes`: filling it would hurt the machine."""
    total = shutil.disk_usage(folder).total
    if total > max_bytes:
        raise FaultRefused(
            f"The disk fault fills the disk holding {folder} ({total / 1024**3:.1f} GB), "
            "which is too large to fill safely: put --home on a small tmpfs "
            "(mount -t tmpfs -o size=300m tmpfs DIR)."
        )


def fill_disk(folder: Path) -> Path:
    """Write a ballast file into `folder` until the disk is full; returns it (see `free_disk`)."""
    check_fillable(folder)
    ballast = folder / BALLAST
    chunk = _CHUNK
    with open(ballast, "ab", buffering=0) as handle:
        while chunk >= 512:
            try:
                handle.write(b"\0" * chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                chunk //= 2  # the last few blocks: smaller writes take them too
    return ballast


def free_disk(ballast: Path) -> None:
    ballast.unlink(missing_ok=True)


# --- a long write lock -----------------------------------------------------------------------

_HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def hold_write_lock(db_path: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process takes the database's write lock and keeps it for `seconds`.

    Returns once the lock is held (the child says so); the child lets go by itself.
    """
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(db_path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    if holder.stdout.readline().strip() != "locked":
        holder.wait()
        raise RuntimeError(f"the lock holder could not lock {db_path} (exit {holder.returncode})")
    return holder


def release_lock(holder: subprocess.Popen[str]) -> None:
    """End the holder now (rolls back: it never wrote anything)."""
    if holder.poll() is None:
        holder.kill()
    holder.wait()
    if holder.stdout is not None:
        holder.stdout.close()


# --- a frozen worker -------------------------------------------------------------------------


def freeze(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)


def thaw(pid: int) -> None:
    # Killed while frozen (the watchdog's kill, or ours): nothing to thaw.
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def is_frozen(pid: int) -> bool:
    """The process is stopped by a signal (Linux: state T in /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")


# --- a damaged checkpoint --------------------------------------------------------------------


def checkpoint_files(folder: Path) -> list[Path]:
    """Checkpoints on disk now (not the temporary halves of an atomic write)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.endswith(".tmp"))


def damage_file(path: Path, rng: random.Random, size: int = DAMAGE_BYTES) -> bool:
    """Overwrite `size` bytes inside `path` with random ones, in place (as `dd conv=notrunc`).

    Small files get their middle half overwritten. False if the file was gone.
    """
    try:
        with open(path, "r+b") as handle:
            length = handle.seek(0, os.SEEK_END)
            count = min(size, max(1, length // 2))
            offset = rng.randrange(0, max(1, length - count + 1))
            handle.seek(offset)
            handle.write(rng.randbytes(count))
    except FileNotFoundError:
        return False
    return True


# --- the schedule ----------------------------------------------------------------------------


@dataclass
class Undo:
    due: float  # time.monotonic()
    kind: FaultKind
    run: Callable[[], None]


@dataclass
class FaultDriver:
    """Puts one fault of a chosen kind in place and undoes it when due (or at the end).

    `worker_pid()`: a worker holding a job, now (None: none); `still_alive(pid)`: that pid is
    still that worker (never signal a process that merely reuses a dead worker's pid).
    """

    kinds: frozenset[FaultKind]
    rng: random.Random
    home: Path
    worker_pid: Callable[[], int | None]
    still_alive: Callable[[int], bool]
    lock_s: float = 20.0
    disk_s: float = 4.0
    stop_s: tuple[float, float] = (1.0, 8.0)  # shorter and longer than the heartbeat timeout
    clock: Callable[[], float] = time.monotonic
    injected: Counter[FaultKind] = field(default_factory=Counter)
    pending: list[Undo] = field(default_factory=list)

    def active(self) -> set[FaultKind]:
        return {undo.kind for undo in self.pending}

    def inject_one(self) -> FaultKind | None:
        """A fault of a random enabled kind not already in place; which one, if any."""
        choices = sorted(self.kinds - self.active())
        if not choices:
            return None
        kind = self.rng.choice(choices)
        done = {
            FaultKind.DISK: self._disk,
            FaultKind.LOCK: self._lock,
            FaultKind.STOP: self._stop,
            FaultKind.CKPT: self._ckpt,
        }[kind]()
        if done:
            self.injected[kind] += 1
        return kind if done else None

    def undo_due(self) -> None:
        now = self.clock()
        for undo in [u for u in self.pending if u.due <= now]:
            self.pending.remove(undo)
            undo.run()

    def undo_all(self) -> None:
        while self.pending:
            self.pending.pop(0).run()

    def _later(self, delay_s: float, kind: FaultKind, run: Callable[[], None]) -> None:
        self.pending.append(Undo(self.clock() + delay_s, kind, run))

    def _disk(self) -> bool:
        ballast = fill_disk(self.home)
        self._later(self.disk_s, FaultKind.DISK, lambda: free_disk(ballast))
        return True

    def _lock(self) -> bool:
        holder = hold_write_lock(self.home / "easel.db", self.lock_s)
        self._later(self.lock_s + 1.0, FaultKind.LOCK, lambda: release_lock(holder))
        return True

    def _stop(self) -> bool:
        pid = self.worker_pid()
        if pid is None:
            return False
        freeze(pid)

        def thaw_if_same() -> None:
            if self.still_alive(pid):
                thaw(pid)

        self._later(self.rng.uniform(*self.stop_s), FaultKind.STOP, thaw_if_same)
        return True

    def _ckpt(self) -> bool:
        files = checkpoint_files(self.home / "checkpoints")
        return bool(files) and damage_file(self.rng.choice(files), self.rng)
