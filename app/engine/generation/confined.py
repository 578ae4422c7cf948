"""Names, not paths, from outside: what a client on the network or a peer on a shared queue
names must be a file inside the model folders (files only: no torch).

The command line and the window may name any file on this machine (its user owns the
disk); a request from the network, and a job read from a shared PostgreSQL queue, may only
name what the model folders hold. A name that looks like a path, a name not installed,
and an installed name whose file a link takes outside the folders are refused with the
same sentence, so a refusal tells a client nothing about the server's disk.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath


def looks_like_path(name: str) -> bool:
    """An absolute path, a home folder (`~`), a drive, or a name that climbs (`..`)."""
    if not name or "\x00" in name or name.startswith("~"):
        return True
    windows = PureWindowsPath(name)
    if PurePosixPath(name).is_absolute() or windows.is_absolute() or windows.drive:
        return True
    return ".." in windows.parts  # splits on both "/" and "\\"


def resolved(path: Path) -> Path | None:
    """`path` with every link followed; None for a link loop or an unreadable place."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a link loop (Python before 3.13)
        return None


def is_inside(path: Path, roots: Iterable[Path]) -> bool:
    """Whether `path`, links followed, lies inside one of `roots` (links followed too)."""
    target = resolved(path)
    if target is None:
        return False
    for root in roots:
        real_root = resolved(root)
        if real_root is not None and target.is_relative_to(real_root):
            return True
    return False


def stays_inside(path: Path, roots: Sequence[Path]) -> bool:
    """`is_inside` for a model's file or folder: a folder's every file too (a pipeline
    folder may hold a link to a weights file anywhere)."""
    if not is_inside(path, roots):
        return False
    if not path.is_dir():
        return True
    try:
        return all(is_inside(item, roots) for item in path.rglob("*"))
    except (OSError, RuntimeError):
        return False
