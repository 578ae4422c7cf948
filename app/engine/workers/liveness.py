"""Who a worker is, and whether it is still alive: an identity, never a bare pid.

A worker's id is `host:pid:token`, with a fresh random token per launch. While it lives,
the worker holds an OS lock on `<liveness dir>/<token>.lock`; the OS drops that lock when
the process ends, however it ends (SIGKILL, OOM killer, power cut of the app). So "is
worker X alive" is "is its lock still held", which a reused pid can never fake.
Workers on other hosts cannot be checked this way; callers fall back to heartbeat age.

A worker also holds a second lock on the same token in one folder per user on this machine
(`machine_dir`), so its liveness does not depend on which data folder looks: on a shared
queue, `recover` from data folder B sees that a worker started from folder A is alive.
The data folder's own lock stays what `db restore` counts (workers on *this* database).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

LOCK_SUFFIX = ".lock"


@dataclass(frozen=True)
class WorkerIdentity:
    host: str
    pid: int
    token: str

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}:{self.token}"

    @classmethod
    def parse(cls, text: str | None) -> WorkerIdentity | None:
        """The identity in a job's `worker_id`, or None for anything else (e.g. a test's name)."""
        if not text:
            return None
        host, _, rest = text.rpartition(":")
        host, _, pid = host.rpartition(":")
        if not (host and pid.isdigit() and rest):
            return None
        return cls(host, int(pid), rest)

    @property
    def is_local(self) -> bool:
        return self.host == this_host()


def this_host() -> str:
    return socket.gethostname()


def new_token() -> str:
    return uuid.uuid4().hex[:12]


def lock_path(folder: Path, token: str) -> Path:
    return folder / f"{token}{LOCK_SUFFIX}"


def machine_dir() -> Path:
    """The worker locks of this user on this machine, whichever data folder started them.

    Per user (in the temp folder, which `TMPDIR` moves), so another user's workers are
    never judged, and nobody else can plant a lock that would make a dead worker look alive.
    """
    user = str(os.getuid()) if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"easel-workers-{user}"


def _usable_machine_dir() -> Path | None:
    """`machine_dir()`, created private; None where it cannot be ours (then only the data
    folder's lock says a worker lives, as before)."""
    folder = machine_dir()
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        if hasattr(os, "getuid") and folder.stat().st_uid != os.getuid():
            log.warning("%s belongs to another user; worker locks stay per data folder", folder)
            return None
    except OSError as error:
        log.warning("no machine-wide worker locks (%s); they stay per data folder", error)
        return None
    return folder


class _HeldFile:
    """One lock file, held open (and so locked) until released."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[bytes] | None = None

    def take(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Kept open for the worker's whole life: closing it would release the lock.
        handle = open(self.path, "a+b")  # noqa: SIM115 (held open until `release`)
        if not try_lock(handle):
            handle.close()
            raise RuntimeError(f"worker lock {self.path} is already held")
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing releases the lock
            self._handle = None
        with contextlib.suppress(OSError):
            self.path.unlink()


class LivenessLock:
    """Held by a worker for its whole life (`with LivenessLock(...)`): in its data folder's
    liveness folder, and in this machine's (`machine_dir`) where that one is usable."""

    def __init__(self, folder: Path, token: str) -> None:
        self.path = lock_path(folder, token)
        machine = _usable_machine_dir()
        self._files = [_HeldFile(self.path)]
        if machine is not None and machine.resolve() != folder.resolve():
            self._files.append(_HeldFile(lock_path(machine, token)))

    def __enter__(self) -> LivenessLock:
        try:
            for held in self._files:
                held.take()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for held in self._files:
            held.release()


def remove_lock(folder: Path, token: str) -> None:
    """Delete a dead worker's lock files, here and machine-wide (its supervisor reaped it)."""
    for path in (lock_path(folder, token), lock_path(machine_dir(), token)):
        path.unlink(missing_ok=True)


def is_alive(identity: WorkerIdentity, folder: Path) -> bool:
    """True while the worker `identity` (on this host) is running, whichever data folder
    it was started from: its lock in `folder` decides if it is there, else its machine-wide
    lock (a worker of another data folder on the same shared queue)."""
    if sys.platform != "win32" and not pid_exists(identity.pid):
        return False  # fast path; on Windows os.kill(pid, 0) would terminate the process
    for place in (folder, machine_dir()):
        held = _lock_held(lock_path(place, identity.token))
        if held is not None:
            return held
    return False


def _lock_held(path: Path) -> bool | None:
    """Whether a live process holds the lock at `path`; None if there is no such file."""
    try:
        with open(path, "rb+") as handle:
            # If we can take the lock, nobody holds it: the worker is gone (its pid reused).
            return not try_lock(handle)
    except FileNotFoundError:
        return None


def remove_stale_locks(folder: Path, *, min_age_s: float = 60.0) -> int:
    """Delete lock files no live worker holds (left by killed workers). Returns how many.

    Young files are left alone: a worker that just created its file may not have locked it yet.
    """
    removed = 0
    now = time.time()
    for path in folder.glob(f"*{LOCK_SUFFIX}") if folder.is_dir() else []:
        try:
            if now - path.stat().st_mtime < min_age_s:
                continue
            with open(path, "rb+") as handle:
                if not try_lock(handle):
                    continue
            path.unlink()
            removed += 1
        except OSError:
            continue
    return removed


def held_locks(folder: Path) -> list[Path]:
    """The lock files in `folder` that a live process holds, one per live worker."""
    held = []
    for path in sorted(folder.glob(f"*{LOCK_SUFFIX}")) if folder.is_dir() else []:
        try:
            with open(path, "rb+") as handle:
                if not try_lock(handle):
                    held.append(path)
        except OSError:  # removed meanwhile: its worker exited
            continue
    return held


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


if sys.platform == "win32":
    import msvcrt

    def try_lock(handle: IO[bytes]) -> bool:
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        except OSError:
            return False
        return True

else:
    import fcntl

    def try_lock(handle: IO[bytes]) -> bool:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
