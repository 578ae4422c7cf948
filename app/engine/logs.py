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


def log_path(role: str) -> Path:
    # No folder is created here: naming the file must work on a read-only data folder too.
    return paths.logs_dir(create=False) / f"{role}.log"


def configure_logging(role: str, *, level: int = logging.INFO, echo: bool = False) -> Path:
    """Send this process's logs to `logs/<role>.log` (and stderr when `echo`).

    A data folder that cannot be written (read-only disk, no permission) must not stop the
    app: the logs then go to stderr, after a one-line warning saying so."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "easel_handler", False):
            root.removeHandler(handler)
            handler.close()
    path = log_path(role)
    handlers: list[logging.Handler] = []
    try:
        path.parent.mkdir(exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(
                path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"
            )
        )
    except OSError as error:
        print(f"warning: cannot write the log {path} ({error.strerror}); logging to stderr",
              file=sys.stderr)  # fmt: skip
        echo = True
    if echo:
        handlers.append(logging.StreamHandler())
    for handler in handlers:
        handler.easel_handler = True  # type: ignore[attr-defined]
        handler.addFilter(_RoleFilter(role))
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
    root.setLevel(level)
    return path
