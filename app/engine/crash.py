"""Knowing whether the last run ended cleanly, and what it left behind.

At start the app writes a marker file and points `faulthandler` at a crash log; a clean
exit removes the marker. A marker still there at the next start (from a process that
is gone) means the last run died: killed, crashed, or the machine lost power.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from app.engine import paths
from app.engine.workers.liveness import pid_exists

log = logging.getLogger(__name__)

MARKER = "running.json"
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
        self._folder = data_dir or paths.data_dir()
        self._marker = self._folder / f"{role}-{MARKER}"
        self._crash_log = paths.logs_dir() if data_dir is None else data_dir / "logs"
        self._crash_log.mkdir(parents=True, exist_ok=True)
        self._crash_path = self._crash_log / f"{role}-{CRASH_LOG}"
        self._crash_file: IO[str] | None = None
        self.previous: UncleanExit | None = None

    def open(self) -> UncleanExit | None:
        """Check the last run, then mark this one. Returns how the last run ended badly."""
        self.previous = self._read_previous()
        self._rotate_crash_log()
        self._crash_file = self._crash_path.open("a", encoding="utf-8")
        faulthandler.enable(self._crash_file, all_threads=True)
        record = {"pid": os.getpid(), "started_at": time.time()}
        tmp = self._marker.with_suffix(".tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, self._marker)
        return self.previous

    def close(self) -> None:
        self._marker.unlink(missing_ok=True)
        if self._crash_file is not None:
            faulthandler.disable()
            self._crash_file.close()
            self._crash_file = None
            if self._crash_path.exists() and self._crash_path.stat().st_size == 0:
                self._crash_path.unlink()

    def _read_previous(self) -> UncleanExit | None:
        try:
            record = json.loads(self._marker.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            record = {"pid": 0, "started_at": 0.0}
        pid = int(record.get("pid", 0))
        if pid and pid != os.getpid() and pid_exists(pid):
            log.warning("another Easel (pid %s) is running on this data folder", pid)
            return None
        crash_text = _tail(self._crash_path)
        return UncleanExit(
            pid=pid,
            started_at=float(record.get("started_at", 0.0)),
            crash_log=self._crash_path if crash_text else None,
            crash_text=crash_text,
        )

    def _rotate_crash_log(self) -> None:
        """Keep the last crash's log beside the new one, so the dialog can open it."""
        if self._crash_path.exists() and self._crash_path.stat().st_size:
            os.replace(self._crash_path, self._crash_path.with_suffix(".previous.log"))
            if self.previous is not None and self.previous.crash_log is not None:
                self.previous = UncleanExit(
                    self.previous.pid, self.previous.started_at,
                    self._crash_path.with_suffix(".previous.log"), self.previous.crash_text,
                )  # fmt: skip


def _tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-TAIL_CHARS:].strip()
