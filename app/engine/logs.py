"""Log files: one rotating file per process role in the data folder's `logs/`.

Each process writes its own file (`gui.log`, `worker-1.log`, ...) so rotation never
races between processes; every line carries the process role, and job ids appear in
messages as `job 42` so `grep "job 42" logs/*.log` follows one job everywhere.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from app.engine import paths

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(role)s %(name)s: %(message)s"
MAX_BYTES = 2_000_000
BACKUPS = 3


class _RoleFilter(logging.Filter):
    def __init__(self, role: str) -> None:
        super().__init__()
        self.role = role

    def filter(self, record: logging.LogRecord) -> bool:
        record.role = self.role
        return True


class _LogFile(logging.handlers.RotatingFileHandler):
    """The log file; once it cannot be written (disk full), one line on stderr says so and
    the records go there instead of a "Logging error" traceback for every one of them."""

    role: str = ""

    def handleError(self, record: logging.LogRecord) -> None:
        root = logging.getLogger()
        if self not in root.handlers:
            return
        root.removeHandler(self)
        _warn(self.baseFilename, sys.exc_info()[1])
        stderr = _stderr_handler(self.role)
        root.addHandler(stderr)
        stderr.handle(record)


def log_path(role: str) -> Path:
    # No folder is created here: naming the file must work on a read-only data folder too.
    return paths.logs_dir(create=False) / f"{role}.log"


def configure_logging(role: str, *, level: int = logging.INFO, echo: bool = False) -> Path:
    """Send this process's logs to `logs/<role>.log` (and stderr when `echo`).

    A data folder that cannot be written (read-only disk, no permission, full) must not
    stop the app: the logs then go to stderr, after a one-line warning saying so."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "easel_handler", False):
            root.removeHandler(handler)
            handler.close()
    path = log_path(role)
    handlers: list[logging.Handler] = []
    try:
        path.parent.mkdir(exist_ok=True)
        log_file = _LogFile(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
        log_file.role = role
        handlers.append(log_file)
    except OSError as error:
        _warn(path, error)
        echo = True
    for handler in handlers:
        root.addHandler(_easel_handler(handler, role))
    if echo:
        root.addHandler(_stderr_handler(role))
    root.setLevel(level)
    return path


def _stderr_handler(role: str) -> logging.Handler:
    """At most one per process (`echo` and a failed log file both want it)."""
    root = logging.getLogger()
    existing = [h for h in root.handlers if getattr(h, "easel_stderr", False)]
    if existing:
        root.removeHandler(existing[0])
    handler = _easel_handler(logging.StreamHandler(), role)
    handler.easel_stderr = True  # type: ignore[attr-defined]
    return handler


def _easel_handler(handler: logging.Handler, role: str) -> logging.Handler:
    handler.easel_handler = True  # type: ignore[attr-defined]
    handler.addFilter(_RoleFilter(role))
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    return handler


def _warn(path: Path | str, error: BaseException | None) -> None:
    reason = getattr(error, "strerror", None) or str(error)
    print(f"warning: cannot write the log {path} ({reason}); logging to stderr", file=sys.stderr)
