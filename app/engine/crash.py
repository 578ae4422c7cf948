"""Knowing whether the last run ended cleanly, and what it left behind.

Each run of the app holds a session of its own in `<data>/sessions/`: a marker file (its pid,
when it started, its crash log) and an OS lock held for its whole life, and it points
`faulthandler` at a crash log of its own. A clean exit removes both. A marker whose lock
nobody holds belongs to a run that died: killed, crashed, or the machine lost power.

One session per run, not one marker per data folder: with two windows on one folder, the
second must neither take the first's marker for its own (and remove it at its clean exit)
nor mistake the first, alive, for a dead run; and a kill -9 of the first is told at the next
launch whoever closes last. Whoever takes a dead session's lock reports it, once.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from app.engine import paths
from app.engine.workers.liveness import (
    LivenessLock,
    held_locks,
    new_token,
    pid_exists,
    try_lock,
)

log = logging.getLogger(__name__)

SESSIONS = "sessions"
LEGACY_MARKER = "running.json"  # <role>-running.json, one per data folder, before sessions
CRASH_LOG = "crash.log"
TAIL_CHARS = 4000


@dataclass(frozen=True)
class UncleanExit:
    """The previous run did not close cleanly."""

    pid: int
    started_at: float
    crash_log: Path | None  # set when faulthandler wrote a traceback
    crash_text: str  # the end of that traceback, for the dialog


class SessionGuard:
    """Marks this run as running; `close()` marks it as ended cleanly."""

    def __init__(self, role: str = "gui", data_dir: Path | None = None) -> None:
        data = data_dir or paths.data_dir()
        self._role = role
        self._sessions = data / SESSIONS
        self._legacy_marker = data / f"{role}-{LEGACY_MARKER}"
        self._name = f"{role}-{new_token()}"
        self._marker = self._sessions / f"{self._name}.json"
        self._lock = LivenessLock(self._sessions, self._name)
        self._logs = paths.logs_dir() if data_dir is None else data_dir / "logs"
        self._logs.mkdir(parents=True, exist_ok=True)
        self._crash_path = self._logs / f"{self._name}-{CRASH_LOG}"
        self._crash_file: IO[str] | None = None
        self.previous: UncleanExit | None = None

    def open(self) -> UncleanExit | None:
        """Check the runs before this one, then mark this one. Returns how the newest run
        that died ended (None: every earlier run closed cleanly or is still running)."""
        self.previous = self._legacy_previous() or self._dead_sessions()
        self._lock.__enter__()
        self._crash_file = self._crash_path.open("a", encoding="utf-8")
        faulthandler.enable(self._crash_file, all_threads=True)
        record = {"pid": os.getpid(), "started_at": time.time(), "crash_log": self._crash_path.name}
        tmp = self._marker.with_suffix(".tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, self._marker)
        return self.previous

    def close(self) -> None:
        self._marker.unlink(missing_ok=True)
        self._lock.__exit__()
        if self._crash_file is not None:
            faulthandler.disable()
            self._crash_file.close()
            self._crash_file = None
            _remove_if_empty(self._crash_path)

    def _dead_sessions(self) -> UncleanExit | None:
        """The newest of the earlier runs whose lock nobody holds; each is reported once."""
        found = []
        for marker in sorted(self._sessions.glob(f"{self._role}-*.json")):
            with _claimed(self._sessions / f"{marker.stem}.lock") as dead:
                if dead:
                    found.append(self._settled(marker))
        if not found:
            return None
        newest = max(found, key=lambda unclean: unclean.started_at)
        if len(found) > 1:
            log.warning("%d earlier runs did not close cleanly; telling the newest", len(found))
        return newest

    def _settled(self, marker: Path) -> UncleanExit:
        """What a dead run's marker says; its crash log is kept as `*.previous.log`."""
        record = _Record.read(marker)
        crash_log = self._logs / record.crash_log if record.crash_log else None
        crash_text = _tail(crash_log) if crash_log else ""
        kept = None
        if crash_log and crash_text:
            kept = self._logs / f"{self._role}-crash.previous.log"
            os.replace(crash_log, kept)
        elif crash_log:
            _remove_if_empty(crash_log)
        marker.unlink(missing_ok=True)
        return UncleanExit(record.pid, record.started_at, crash_log=kept, crash_text=crash_text)

    def _legacy_previous(self) -> UncleanExit | None:
        """A marker left by a version of Easel before sessions (pid only, no lock)."""
        if not self._legacy_marker.exists():
            return None
        record = _Record.read(self._legacy_marker)
        if record.pid and record.pid != os.getpid() and pid_exists(record.pid):
            return None  # that older Easel still runs: its marker is its own
        self._legacy_marker.unlink(missing_ok=True)
        return UncleanExit(record.pid, record.started_at, crash_log=None, crash_text="")


def live_sessions(data_dir: Path) -> int:
    """How many runs of the app (windows) hold a session on `data_dir` now."""
    return len(held_locks(data_dir / SESSIONS))


@contextlib.contextmanager
def _claimed(lock_file: Path) -> Iterator[bool]:
    """True (with the lock held until the block ends) when nobody holds `lock_file`: its
    run is gone, and this process, alone, may settle it. False while its run lives."""
    try:
        handle = open(lock_file, "rb+")  # noqa: SIM115 (the with below closes it)
    except FileNotFoundError:
        # Its marker still there: it died before it locked. Gone: another launch settled it
        # (it removes the marker before the lock file).
        yield lock_file.with_suffix(".json").exists()
        return
    with handle:
        if not try_lock(handle):
            yield False
            return
        yield True
        with contextlib.suppress(OSError):
            lock_file.unlink()


@dataclass(frozen=True)
class _Record:
    """A session marker's contents; a damaged marker reads as an unknown run that died."""

    pid: int = 0
    started_at: float = 0.0
    crash_log: str = ""  # its file name in the logs folder

    @classmethod
    def read(cls, marker: Path) -> _Record:
        try:
            raw = json.loads(marker.read_text(encoding="utf-8"))
            return cls(int(raw.get("pid", 0)), float(raw.get("started_at", 0.0)),
                       Path(str(raw.get("crash_log", ""))).name)  # fmt: skip
        except (OSError, ValueError, TypeError, AttributeError):
            return cls()


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.stat().st_size == 0:
            path.unlink()


def _tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-TAIL_CHARS:].strip()
