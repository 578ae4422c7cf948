"""Fault injectors for the chaos benchmark (issue 10): each puts a fault in place, now.

    disk   the data folder's disk is full (a ballast file takes every free byte)
    lock   another process holds SQLite's write lock (BEGIN IMMEDIATE) for a while
    stop   a worker is frozen with SIGSTOP, and thawed with SIGCONT later
    ckpt   a checkpoint file gets 4 KB of random bytes in its middle

and of issue 21:

    skew        a worker whose clock is minutes ahead or behind (skewed_clock/; monotonic
                time is left true) runs beside the others for a while (PostgreSQL)
    stall       a running job's step freezes while its worker's heartbeat thread goes on
                (the ledger runner's stall file, `app.testing.ledger.stall_file`)
    db-outage   the PostgreSQL server is stopped for longer than the heartbeat timeout
                (only a private server the benchmark started: `PrivateServer`)
    replace-db  the SQLite file is replaced under the running workers by a backup taken
                a few seconds before, as `db restore` would, while jobs were submitted

and of issue 41:

    contention  a busy machine: for `contention_s` the workers share one core with
                `BUSY_LOOPS` busy loops (1/8 of a core each, with two workers) and the
                healthy ones are also stopped (SIGSTOP) for 0.3-1.5 s every 2.5 s;
                one running job is planted a hang (the stall file) on a worker left out
                of the bursts, so that its detection is measured under the same load

Each injector returns what undoes it, and `FaultDriver` schedules the undo, so that the
chaos driver can, whatever happens, run every pending undo at the end. The faults that need
the chaos driver (a worker to start, jobs to submit) reach it through `DriverHooks`.
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
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from app.testing.ledger import SKEW_ENV, stall_file

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
    SKEW = "skew"
    STALL = "stall"
    DB_OUTAGE = "db-outage"
    REPLACE_DB = "replace-db"
    CONTENTION = "contention"


# Where each kind can run: a shared queue (PostgreSQL) has no file to fill, lock or replace,
# and SQLite has no server to stop; one clock per machine makes skew a shared queue's fault.
SQLITE_ONLY = frozenset({FaultKind.DISK, FaultKind.LOCK, FaultKind.CKPT, FaultKind.REPLACE_DB})
SERVER_ONLY = frozenset({FaultKind.SKEW, FaultKind.DB_OUTAGE})
# While these are in place nobody can write to the store: heartbeats stale only for that
# are no sign of a dead worker (`chaos_checks.Timing.outages`).
STORE_OUTAGES = frozenset({FaultKind.DISK, FaultKind.LOCK, FaultKind.DB_OUTAGE})


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


def check_combination(kinds: frozenset[FaultKind]) -> None:
    """`FaultRefused` for kinds that cannot run together (one store per run)."""
    if kinds & SQLITE_ONLY and kinds & SERVER_ONLY:
        raise FaultRefused(
            f"{', '.join(sorted(kinds & SERVER_ONLY))} need a PostgreSQL queue and "
            f"{', '.join(sorted(kinds & SQLITE_ONLY))} a SQLite one: run them apart."
        )
    if FaultKind.CONTENTION in kinds and not hasattr(os, "sched_setaffinity"):
        raise FaultRefused("contention pins the workers to one core, which needs Linux.")
    if FaultKind.SKEW in kinds and kinds & {FaultKind.STALL, FaultKind.CONTENTION}:
        # A stall's detection is read off the history's times, which a skewed watchdog
        # writes on its own clock until the queue has one clock.
        raise FaultRefused("skew and stall cannot be measured together: run them apart.")


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


# --- a skewed clock --------------------------------------------------------------------------

SKEWED_CLOCK_SITE = Path(__file__).parent / "skewed_clock"  # its sitecustomize skews a process


def skewed_environment(offset_s: float) -> dict[str, str]:
    """What a process needs in its environment to run with its wall clock `offset_s` off
    (monotonic time stays true, so its waits and timeouts stay right), and to know it (the
    ledger): `skewed_clock/sitecustomize.py`, on PYTHONPATH so the workers it spawns run
    skewed too."""
    path = os.pathsep.join(p for p in (str(SKEWED_CLOCK_SITE), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, SKEW_ENV: f"{offset_s:.0f}"}


# --- a stalled step --------------------------------------------------------------------------


def stall(ledger: Path, job: int) -> Path:
    """Freeze the next step of `job`'s run (`app.testing.ledger.LedgerRunner`)."""
    path = stall_file(ledger, job)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return path


def lift_stall(path: Path) -> None:
    """Let the stalled run go on (or, if none took it yet, never stall one)."""
    for asked_or_taken in [path, *path.parent.glob(f"{path.name}.*")]:
        asked_or_taken.unlink(missing_ok=True)


# --- a replaced database file ----------------------------------------------------------------


def back_up_database(db_path: Path, target: Path) -> Path:
    """A consistent copy of the live database (SQLite's online backup), as `db backup`."""
    import sqlite3

    source = sqlite3.connect(db_path, timeout=60)
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    return target


def replace_database(db_path: Path, replacement: Path) -> Path:
    """Put `replacement` where the database is, as `db restore` does (the live file and its
    -wal/-shm set aside, the copy renamed into place); the open connections keep the old
    file. Returns where the old one went."""
    set_aside = db_path.with_name(f"{db_path.name}.replaced-{time.time_ns()}")
    for suffix in ("", "-wal", "-shm"):
        current = Path(f"{db_path}{suffix}")
        if current.exists():
            os.replace(current, Path(f"{set_aside}{suffix}"))
    partial = db_path.with_suffix(".restoring")
    shutil.copyfile(replacement, partial)
    os.replace(partial, db_path)
    return set_aside


# --- a busy machine -------------------------------------------------------------------------

BUSY_LOOPS = 6  # beside two workers on one core: each process gets 1/8 of it
BURST_EVERY_S = 2.5  # and every this often the healthy workers are stopped (SIGSTOP) ...
BURST_STOP_S = (0.3, 1.5)  # ... for this long, at random: shorter and longer than the floor
_BUSY_LOOP = "while True: pass"


class Contention:
    """The contention fault in place: busy loops on one core, every worker pinned beside
    them, and the healthy workers stopped in bursts, until `end`.

    `workers()`: the pids of the live workers now, each with whether it runs the planted
    hang (spared the bursts: a stopped process is no evidence of a hang, by design, so
    bursts would only delay its verdict by the time it spent stopped)."""

    def __init__(self, workers: Callable[[], list[tuple[int, bool]]], rng: random.Random) -> None:
        self._workers = workers
        self._rng = rng
        self._core = {max(os.sched_getaffinity(0))}
        self._pinned: set[int] = set()
        self._loops = [
            subprocess.Popen([sys.executable, "-c", _BUSY_LOOP]) for _ in range(BUSY_LOOPS)
        ]
        for loop in self._loops:
            os.sched_setaffinity(loop.pid, self._core)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._bursts, name="contention", daemon=True)
        self._thread.start()

    def _bursts(self) -> None:
        while not self._done.is_set():
            workers = self._workers()
            for pid, _ in workers:
                self._pin(pid)
            healthy = [pid for pid, planted in workers if not planted]
            stop_s = self._rng.uniform(*BURST_STOP_S)
            for pid in healthy:
                _signal(pid, signal.SIGSTOP)
            self._done.wait(stop_s)
            for pid in healthy:
                _signal(pid, signal.SIGCONT)
            self._done.wait(BURST_EVERY_S - stop_s)

    def _pin(self, pid: int) -> None:
        if pid not in self._pinned:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.sched_setaffinity(pid, self._core)
                self._pinned.add(pid)

    def end(self) -> None:
        """Everything thawed and unpinned, the loops gone."""
        self._done.set()
        self._thread.join(BURST_EVERY_S + 5.0)
        everywhere = os.sched_getaffinity(0)
        for pid in self._pinned:
            _signal(pid, signal.SIGCONT)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.sched_setaffinity(pid, everywhere)
        for loop in self._loops:
            loop.kill()
            loop.wait()


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # ended meanwhile (killed, or stuck)
        os.kill(pid, signum)


# --- the schedule ----------------------------------------------------------------------------


@dataclass
class Undo:
    due: float  # time.monotonic()
    kind: FaultKind
    run: Callable[[], None]
    target: int = 0  # a stall: its job


class Server(Protocol):
    """A PostgreSQL server the benchmark may stop (`chaos_server.PrivateServer`)."""

    def stop(self) -> None: ...

    def start(self) -> object: ...


def _nothing() -> None:
    return None


def _start(server: Server) -> None:
    server.start()


@dataclass
class DriverHooks:
    """What the faults of issue 21 need of the chaos driver; a missing one injects nothing.

    `start_skewed(offset_s)` starts a worker whose clock is that far off and returns what
    stops it; `job_to_stall()` is a running job (None: none); `server` is the PostgreSQL
    server to stop; `backed_up()` runs after the replace fault's backup (the driver submits
    jobs the restore will forget), `replaced()` after the file was replaced; `workers(job)`
    lists the live workers' pids, each with whether it holds `job` (contention)."""

    start_skewed: Callable[[float], Callable[[], None]] | None = None
    job_to_stall: Callable[[], int | None] = lambda: None
    server: Server | None = None
    ledger: Path | None = None
    backed_up: Callable[[], None] = _nothing
    replaced: Callable[[], None] = _nothing
    # contention: the live workers' pids, each with whether its job is the given one
    workers: Callable[[int], list[tuple[int, bool]]] = lambda _job: []


@dataclass
class FaultDriver:
    """Puts one fault of a chosen kind in place and undoes it when due (or at the end).

    `worker_pid()`: a worker holding a job, now (None: none); `still_alive(pid)`: that pid is
    still that worker (never signal a process that merely reuses a dead worker's pid).
    `outages` records, on the true clock (`wall_clock`), when the store could not be written.
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
    hooks: DriverHooks = field(default_factory=DriverHooks)
    skew_minutes: tuple[float, float] = (2.0, 10.0)  # ahead or behind, at random
    skew_s: tuple[float, float] = (15.0, 25.0)  # how long the skewed worker runs
    stall_s: float = 15.0  # lifted then, noticed or not (the goal is a few seconds)
    outage_s: tuple[float, float] = (6.0, 9.0)  # two to three heartbeat timeouts
    restore_after_s: tuple[float, float] = (2.0, 4.0)  # the backup's age when restored
    wall_clock: Callable[[], float] = time.time
    outages: list[tuple[float, float]] = field(default_factory=list)
    replaced_at: list[float] = field(default_factory=list)  # on the true clock
    contention_s: float = 20.0  # how long the machine stays busy
    planted: list[int] = field(default_factory=list)  # contention: jobs planted a hang

    def active(self) -> set[FaultKind]:
        return {undo.kind for undo in self.pending}

    def behind(self, goal: int) -> frozenset[FaultKind]:
        """The enabled kinds injected fewer than `goal` times so far."""
        return frozenset(kind for kind in self.kinds if self.injected[kind] < goal)

    def inject_one(self, among: frozenset[FaultKind] | None = None) -> FaultKind | None:
        """A fault of a random enabled kind (of `among`, if given) not already in place;
        which one, if any."""
        choices = sorted((self.kinds if among is None else among & self.kinds) - self.active())
        if not choices:
            return None
        kind = self.rng.choice(choices)
        done = {
            FaultKind.DISK: self._disk,
            FaultKind.LOCK: self._lock,
            FaultKind.STOP: self._stop,
            FaultKind.CKPT: self._ckpt,
            FaultKind.SKEW: self._skew,
            FaultKind.STALL: self._stall,
            FaultKind.DB_OUTAGE: self._db_outage,
            FaultKind.REPLACE_DB: self._replace_db,
            FaultKind.CONTENTION: self._contention,
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

    def stalled_jobs(self) -> set[int]:
        """Jobs whose step is frozen now: the driver leaves them alone, so that what ends a
        stall is the engine noticing it, never a kill, cancel or pause of ours."""
        return {
            undo.target
            for undo in self.pending
            if undo.kind in (FaultKind.STALL, FaultKind.CONTENTION) and undo.target
        }

    def _later(
        self, delay_s: float, kind: FaultKind, run: Callable[[], None], target: int = 0
    ) -> None:
        if kind in STORE_OUTAGES:
            run = self._recording_outage(run)
        self.pending.append(Undo(self.clock() + delay_s, kind, run, target))

    def _recording_outage(self, undo: Callable[[], None]) -> Callable[[], None]:
        began = self.wall_clock()

        def undo_and_record() -> None:
            undo()
            self.outages.append((began, self.wall_clock()))

        return undo_and_record

    def _disk(self) -> bool:
        ballast = fill_disk(self.home)
        self._later(self.disk_s, FaultKind.DISK, lambda: free_disk(ballast))
        return True

    def _lock(self) -> bool:
        holder = hold_write_lock(self.home / "easel.db", self.lock_s)
        self._later(self.lock_s + 1.0, FaultKind.LOCK, lambda: release_lock(holder))
        return True

    def _skew(self) -> bool:
        if self.hooks.start_skewed is None:
            return False
        minutes = self.rng.uniform(*self.skew_minutes) * self.rng.choice((1, -1))
        stop = self.hooks.start_skewed(minutes * 60)
        self._later(self.rng.uniform(*self.skew_s), FaultKind.SKEW, stop)
        return True

    def _stall(self) -> bool:
        job = self.hooks.job_to_stall()
        if job is None or self.hooks.ledger is None:
            return False
        path = stall(self.hooks.ledger, job)
        self._later(self.stall_s, FaultKind.STALL, lambda: lift_stall(path), target=job)
        return True

    def _contention(self) -> bool:
        """A busy machine for `contention_s`, and a hang planted on one running job."""
        job = self.hooks.job_to_stall()
        if job is None or self.hooks.ledger is None:
            return False
        path = stall(self.hooks.ledger, job)
        self.planted.append(job)
        contention = Contention(lambda: self.hooks.workers(job), random.Random(self.rng.random()))

        def undo() -> None:
            contention.end()
            lift_stall(path)

        self._later(self.contention_s, FaultKind.CONTENTION, undo, target=job)
        return True

    def _db_outage(self) -> bool:
        server = self.hooks.server
        if server is None:
            return False
        server.stop()
        self._later(self.rng.uniform(*self.outage_s), FaultKind.DB_OUTAGE, lambda: _start(server))
        return True

    def _replace_db(self) -> bool:
        """Back up now, let the driver submit jobs, restore the backup a little later."""
        db_path = self.home / "easel.db"
        backup = back_up_database(db_path, self.home / f"chaos-backup-{time.time_ns()}.db")
        self.hooks.backed_up()

        def restore() -> None:
            replace_database(db_path, backup)
            self.replaced_at.append(self.wall_clock())
            self.hooks.replaced()

        self._later(self.rng.uniform(*self.restore_after_s), FaultKind.REPLACE_DB, restore)
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
