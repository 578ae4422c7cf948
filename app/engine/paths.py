"""Where Easel keeps its data and finds its bundled resources.

`EASEL_HOME` (or the CLI's `--home`) overrides the platform data folder, so tests and
portable installs never touch the user's real data.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath

import platformdirs

from app.errors import UserError

APP_NAME = "Easel"
HOME_ENV = "EASEL_HOME"
_SHOWN_CHARS = 60  # of a name too long to show whole


class DataFolderUnusable(UserError):
    """The data folder cannot be made or used: a file is in its way, or its name is too long."""


def data_dir() -> Path:
    override = os.environ.get(HOME_ENV)
    base = (
        Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    )
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataFolderUnusable(_unusable(base, error)) from error
    return base


def _unusable(folder: Path, error: OSError) -> str:
    where = f"(set by --home or ${HOME_ENV})" if os.environ.get(HOME_ENV) else ""
    if error.errno == errno.ENAMETOOLONG:
        longest = max(folder.parts, key=len)
        return (
            f"The data folder's name is too long for the file system: one part has "
            f"{len(longest)} characters ({longest[:_SHOWN_CHARS]}...) {where}".rstrip()
        )
    if isinstance(error, FileExistsError) or folder.is_file():
        return f"The data folder {folder} is a file, not a folder {where}".rstrip()
    if isinstance(error, NotADirectoryError):
        blocking = next((p for p in folder.parents if p.is_file()), folder.parent)
        return f"The data folder {folder} cannot be made: {blocking} is a file {where}".rstrip()
    reason = (error.strerror or str(error)).lower()
    return f"The data folder {folder} cannot be made: {reason} {where}".rstrip()


def database_path() -> Path:
    return data_dir() / "easel.db"


def outputs_dir(*, create: bool = True) -> Path:
    return _subdir("outputs", create=create)


def checkpoints_dir() -> Path:
    return _subdir("checkpoints")


def models_dir() -> Path:
    """The user's own models folder: one diffusers pipeline folder per model."""
    return _subdir("models")


def wildcards_dir() -> Path:
    """Wildcard files (`__name__` in a prompt is `<name>.txt` here; folders nest)."""
    return data_dir() / "wildcards"


def logs_dir(*, create: bool = True) -> Path:
    return _subdir("logs", create=create)


def resources_dir() -> Path:
    """`resources/` beside the package, or inside a PyInstaller bundle."""
    bundle_root = getattr(sys, "_MEIPASS", None)
    if bundle_root:
        return Path(bundle_root) / "resources"
    return Path(__file__).resolve().parents[2] / "resources"


def bundled_models_dir() -> Path:
    return resources_dir() / "models"


def _subdir(name: str, *, create: bool = True) -> Path:
    path = data_dir() / name
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


# --- names, not paths, from outside ------------------------------------------------------------
# The command line and the window may name any file on this machine (its user owns the disk);
# a request from the network, a job read from a shared PostgreSQL queue and a wildcard name
# may only name what their folder holds. A name that looks like a path, a name not there, and
# one whose file a link takes outside the folder are refused alike (README "Files and names").


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


class OutsideItsFolder(UserError):
    """A file name or path read from the job database that would take this machine outside
    the folder it keeps such files in (a peer on a shared queue wrote it)."""


def plain_file_name(name: str) -> bool:
    """A file's own name: no folder, no `..`, nothing absolute."""
    return (
        bool(name)
        and name not in (".", "..")
        and not looks_like_path(name)
        and (PureWindowsPath(name).name == name)
    )


def recorded_file(recorded: str | None, *, shared: bool, folders: Sequence[Path]) -> Path | None:
    """The file a job row records, if this machine may touch it: any on its own (SQLite)
    store, whose rows only its user writes; on a shared store, where any peer writes rows,
    only one inside `folders` (links followed). None otherwise."""
    if not recorded:
        return None
    path = Path(recorded)
    if shared and not is_inside(path, folders):
        return None
    return path
