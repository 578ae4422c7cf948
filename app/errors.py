"""Easel's one error hierarchy (see docs/architecture.md, "Errors").

    EaselError                      everything Easel raises on purpose
    ├── UserError                   the user can act on it: one sentence, never a traceback
    │   ├── BadInput                a request that cannot run as given (exit code 2)
    │   ├── MissingModel            no usable model of that name
    │   └── DatabaseError           the job database's file or the disk holding it
    │       ├── DatabaseLocked      another program holds the write lock (transient)
    │       ├── DiskFull            no room left on the disk (transient)
    │       ├── DatabaseReadOnly    the data folder cannot be written
    │       ├── DatabaseCorrupt     the file is damaged: nothing more is written to it
    │       ├── DatabaseUnreachable a shared queue's server cannot be reached (transient)
    │       └── DiskIOError         the disk failed a read or write
    └── (anything else)             a bug: logged with its traceback, shown as `internal_error`

Whether a failure is worth an automatic retry is a field of the error, `transient`, stored
in its own column of the job table; it is never parsed back out of a message. Errors from
outside Easel (torch, the OS) are classified by `is_transient`.

No Qt, no torch, no database imports: every layer may raise and catch these.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path


class EaselError(Exception):
    """Base of every error Easel raises on purpose."""

    transient: bool = False  # a retry may cure it (class default; instances may override)


class UserError(EaselError):
    """Something the user can act on; `str(error)` is one sentence written for people."""


class BadInput(UserError, ValueError):
    """A request that cannot run as given; the message says exactly what is wrong."""


class MissingModel(UserError, LookupError):
    """No usable model of that name."""


class DatabaseError(UserError):
    """A problem with the job database's file or the disk that holds it (not a bug)."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class DatabaseLocked(DatabaseError):
    transient = True


class DiskFull(DatabaseError):
    transient = True  # space may come back (the worker waits for it)


class DatabaseReadOnly(DatabaseError):
    pass


class DatabaseCorrupt(DatabaseError):
    pass


class DatabaseUnreachable(DatabaseError):
    """The database server is away (restart, network): wait and reconnect."""

    transient = True


class DiskIOError(DatabaseError):
    pass


def is_user_error(error: BaseException) -> bool:
    return isinstance(error, UserError)


# Out of (GPU or host) memory, from torch or the allocator: worth another try later.
_OOM_TYPES = frozenset({"OutOfMemoryError", "MemoryError"})
_OOM_MARKERS = ("out of memory", "can't allocate memory")  # CUDA/MPS; CPU allocator


def is_transient(error: BaseException) -> bool:
    """True for failures a retry may cure: Easel's transient errors, out of memory, ENOSPC."""
    if isinstance(error, EaselError):
        return error.transient
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return True
    if type(error).__name__ in _OOM_TYPES:
        return True
    message = str(error).lower()
    return any(marker in message for marker in _OOM_MARKERS)


def describe(error: BaseException) -> str:
    """The error as stored with a failed job: a user error's sentence, else type and text."""
    text = str(error)
    if is_user_error(error) and text:
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def user_message(error: BaseException, log_file: Path | str) -> str:
    """What to show a person: a user error's own sentence, or "an internal error"."""
    if is_user_error(error) and str(error):
        return str(error)
    return internal_error(error, log_file)


def internal_error(error: BaseException, log_file: Path | str) -> str:
    return f"An internal error occurred ({type(error).__name__}); details are in {log_file}"


def free_megabytes(folder: Path) -> int | None:
    """Free space on the disk holding `folder`, in whole MB; None if it cannot be read."""
    try:
        return shutil.disk_usage(folder).free // 1_000_000
    except OSError:
        return None


def disk_full(folder: Path) -> DiskFull:
    free = free_megabytes(folder)
    space = f"{free} MB free" if free is not None else "free space unknown"
    return DiskFull(
        f"The disk holding {folder} is full ({space}); free some space and Easel carries on",
        folder,
    )
