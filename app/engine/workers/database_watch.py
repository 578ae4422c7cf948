"""Is the SQLite file at the worker's path still the one it opened?

A file deleted, or replaced (a restore, a copy over it) while a worker has it open stays
readable and writable through the worker's connections: without this check the worker
went on finishing jobs into a file nobody could see any more. The check is one `stat` of
the path, compared with the file's device and inode when it was opened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from app.errors import DatabaseError


class DatabaseFileReplaced(DatabaseError):
    """The file at the database's path is not the one this process opened: every write
    from then on would go where nobody looks."""


@dataclass(frozen=True)
class FileIdentity:
    device: int
    inode: int


def identity_of(path: Path) -> FileIdentity | None:
    """The file at `path` now; None when there is none. Raises OSError when it cannot be
    told (a disk gone away): not knowing is never taken for "replaced"."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return FileIdentity(found.st_dev, found.st_ino)


class DatabaseFileWatch:
    """Remembers the database file as opened; `problem()` says whether it is still there."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._opened = identity_of(path)

    def problem(self) -> DatabaseFileReplaced | None:
        """Why the file at the path is no longer the one opened; None while it still is."""
        try:
            now = identity_of(self.path)
        except OSError:
            return None  # cannot tell now: the next check will
        if self._opened is None or now == self._opened:
            return None
        what = "was deleted" if now is None else "was replaced by another file"
        return DatabaseFileReplaced(
            f"The job database {self.path} {what} while this worker had it open; the worker "
            "stopped and writes nothing more (its job in hand stays as it was in the file it "
            "had open)",
            self.path,
        )
