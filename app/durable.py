"""Renames that survive a power cut: the file's bytes, then the folder's entry, on the disk.

A rename is atomic but not durable: until the folder itself is flushed, the new name lives
in the page cache, and a power cut (or an OS crash) can bring back the old file or none,
after the queue already recorded the new one. So: flush the file, rename it, flush its
folder (POSIX's recipe, and what SQLite does for its own journals).

Below every layer (standard library only): the models' backups and the engine's images,
checkpoints and settings all write through `durable_replace` or `atomic_write`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

# A folder on a file system that cannot flush one (some network and FUSE mounts) answers
# these; the rename is done and as durable as that file system makes anything, so it
# stands. Any other failure (EIO: the disk lost what it held) is raised.
_CANNOT_SYNC_FOLDER = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EACCES, errno.EBADF}


def durable_replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """`os.replace(source, target)`, with `source` flushed before and the folders after."""
    source, target = Path(source), Path(target)
    fsync_file(source)
    os.replace(source, target)
    fsync_folder(target.parent)
    if source.parent.resolve() != target.parent.resolve():
        fsync_folder(source.parent)  # the old name's removal, so it cannot come back


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Flush a file's bytes to the disk. POSIX flushes through any handle, so a file this
    user may only read is flushed too; Windows' `_commit` needs one opened for writing."""
    flags = os.O_RDWR | getattr(os, "O_BINARY", 0) if os.name == "nt" else os.O_RDONLY
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Flush a folder's entries (a rename, a new file) to the disk. A no-op on Windows:
    a folder cannot be opened as a file there, so a rename rests on NTFS's own journal."""
    if os.name == "nt":
        return
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as error:
        if error.errno in _CANNOT_SYNC_FOLDER:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in _CANNOT_SYNC_FOLDER:
            raise
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write via a temp file in the same folder + rename, so readers never see half a file;
    the file and then its folder are flushed, so a power cut never takes a written file back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
        fsync_folder(path.parent)  # the new name too: an acknowledged image survives a power cut
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
