"""Who a worker is, and whether it is still alive: an identity, never a bare pid.

A worker's id is `host:pid:token`, with a fresh random token per launch. While it lives,
the worker holds an OS lock on `<liveness dir>/<token>.lock`; the OS drops that lock when
the process ends, however it ends (SIGKILL, OOM killer, power cut of the app). So "is
worker X alive" is "is its lock still held", which a reused pid can never fake.
Workers on other hosts cannot be checked this way; callers fall back to heartbeat age.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

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


class LivenessLock:
    """Held by a worker for its whole life (`with LivenessLock(...)`)."""

    def __init__(self, folder: Path, token: str) -> None:
        self.path = lock_path(folder, token)
        self._handle: IO[bytes] | None = None

    def __enter__(self) -> LivenessLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Kept open for the worker's whole life: closing it would release the lock.
        handle = open(self.path, "a+b")
        if not try_lock(handle):
            handle.close()
            raise RuntimeError(f"worker lock {self.path} is already held")
        self._handle = handle
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.close()  # closing releases the lock
            self._handle = None
        with contextlib.suppress(OSError):
            self.path.unlink()


def is_alive(identity: WorkerIdentity, folder: Path) -> bool:
    """True while the worker `identity` (on this host) is running."""
    if sys.platform != "win32" and not pid_exists(identity.pid):
        return False  # fast path; on Windows os.kill(pid, 0) would terminate the process
    try:
        with open(lock_path(folder, identity.token), "rb+") as handle:
            # If we can take the lock, nobody holds it: the worker is gone (its pid reused).
            return not try_lock(handle)
    except FileNotFoundError:
        return False


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
