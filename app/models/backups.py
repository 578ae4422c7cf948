"""Backups of a SQLite job database: rotating copies beside it, and putting one back.

PostgreSQL's server keeps its own backups; these are for the one-machine file.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path
from urllib.parse import quote

from app.durable import durable_replace
from app.errors import DatabaseError
from app.models.db import Database, sqlite_synchronous
from app.models.migrations import SCHEMA_VERSION

_DETAIL_CHARS = 120  # of SQLite's finding, in the one-line refusal
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file

BACKUP_FOLDER = "backups"
BACKUPS_KEPT = 3
# Left free after a backup: the queue must go on working on that disk (the journal grows to
# its 4 MiB limit between trims; images and checkpoints are written beside it). A backup that
# would leave less is skipped: it must never take the last free space.
BACKUP_HEADROOM_BYTES = 16 * 1024 * 1024


class NoRoomForBackup(DatabaseError):
    """The disk has no room for a backup and the headroom the queue needs after it."""


def backups_dir(db_path: Path) -> Path:
    return db_path.parent / BACKUP_FOLDER


def list_backups(db_path: Path) -> list[Path]:
    """Backups of the database at `db_path`, oldest first."""
    return sorted(backups_dir(db_path).glob(f"{db_path.stem}-*.db"))


def back_up(db: Database, *, keep: int = BACKUPS_KEPT, now: float | None = None) -> Path:
    """A consistent copy with SQLite's online backup API, e.g. `backups/easel-20261130-193000.db`;
    only the newest `keep` are kept. Take it after `check_database`: a damaged copy must
    never push out a good one. Raises `NoRoomForBackup`, having written nothing, when the
    copy would leave less than `BACKUP_HEADROOM_BYTES` free."""
    assert db.path is not None
    folder = backups_dir(db.path)
    check_room_for_backup(db.path)
    with db.translated_errors():
        folder.mkdir(exist_ok=True)
        target = _unused_name(folder, db.path.stem, time.time() if now is None else now)
        partial = target.with_suffix(".partial")
        try:
            _copy_database(db.path, partial)
        except BaseException:
            partial.unlink(missing_ok=True)  # a half copy must not keep the space it took
            raise
        durable_replace(partial, target)
    for old in list_backups(db.path)[:-keep]:
        old.unlink(missing_ok=True)
    return target


def check_room_for_backup(db_path: Path) -> None:
    """Refuse (`NoRoomForBackup`) a backup that would leave the disk without headroom."""
    needed = _database_bytes(db_path) + BACKUP_HEADROOM_BYTES
    free = shutil.disk_usage(db_path.parent).free
    if free < needed:
        raise NoRoomForBackup(
            f"No room for a backup: the disk holding {db_path.parent} has {_mb(free)} free, and a "
            f"backup needs {_mb(needed)} (the database's size and {_mb(BACKUP_HEADROOM_BYTES)} "
            "left for the queue to keep working); free some space",
            db_path,
        )


def _database_bytes(db_path: Path) -> int:
    """What a backup of the database may take: the file and its write-ahead log."""
    sizes = (Path(f"{db_path}{suffix}") for suffix in ("", "-wal"))
    return sum(path.stat().st_size for path in sizes if path.exists())


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def _copy_database(db_path: Path, copy_path: Path) -> None:
    source = sqlite3.connect(f"file:{quote(str(db_path.resolve()))}?mode=ro", uri=True)
    copy = sqlite3.connect(copy_path)
    try:
        copy.execute(f"PRAGMA synchronous={sqlite_synchronous()}")  # as every queue connection
        source.backup(copy)
    finally:
        copy.close()
        source.close()


def _unused_name(folder: Path, stem: str, now: float) -> Path:
    """`<stem>-<date>-<time>-<ms>.db`, never one that exists: backups taken in the same
    second (or millisecond) must not overwrite each other. Names sort by time."""
    millis = int(now * 1000)
    while True:
        seconds, ms = divmod(millis, 1000)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(seconds))
        target = folder / f"{stem}-{stamp}-{ms:03d}.db"
        if not target.exists() and not target.with_suffix(".partial").exists():
            return target
        millis += 1


def restore_backup(db_path: Path, backup: Path | None = None) -> tuple[Path, Path]:
    """Put `backup` (default: the newest) in place of the database, once it proved to be an
    intact Easel job database. The file it replaces is kept beside it, as
    `<name>.damaged-<time>` when its own check fails, else `<name>.replaced-<time>`. Returns
    (backup used, where the old file went). Only while no Easel process has the database
    open (the caller makes sure)."""
    backups = list_backups(db_path)
    chosen = backup or (backups[-1] if backups else None)
    if chosen is None or not chosen.is_file():
        where = chosen or backups_dir(db_path)
        raise DatabaseError(f"There is no backup to restore at {where}", db_path)
    check_restorable(chosen)
    kind = "damaged" if db_path.exists() and _problem(db_path) else "replaced"
    set_aside = _set_aside_name(db_path, kind, time.time())
    for suffix in ("", "-wal", "-shm"):
        current = Path(f"{db_path}{suffix}")
        if current.exists():
            os.replace(current, Path(f"{set_aside}{suffix}"))
    partial = db_path.with_suffix(".restoring")
    shutil.copyfile(chosen, partial)
    durable_replace(partial, db_path)  # flushes the folder: the set-aside renames too
    return chosen, set_aside


def _set_aside_name(db_path: Path, kind: str, now: float) -> Path:
    """`<name>.<kind>-<date>-<time>-<ms>`, never one in use: two restores in one second must
    not put the second set-aside file over the first."""
    millis = int(now * 1000)
    while True:
        seconds, ms = divmod(millis, 1000)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(seconds))
        target = db_path.with_name(f"{db_path.name}.{kind}-{stamp}-{ms:03d}")
        if not any(Path(f"{target}{suffix}").exists() for suffix in ("", "-wal", "-shm")):
            return target
        millis += 1


def check_restorable(candidate: Path) -> None:
    """Refuse, before anything is swapped, a file that is not an intact Easel job database
    of a schema this version can open: a PNG, a damaged copy, another program's database."""
    problem = _problem(candidate)
    if problem:
        raise DatabaseError(f"{candidate} cannot be restored: {problem}; nothing was changed")


def _problem(path: Path) -> str:
    """Why `path` is not an intact Easel job database ("" when it is one)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as error:
        return f"it cannot be read ({error.strerror or error})"
    if header != SQLITE_HEADER:
        return "it is not a SQLite database"
    try:
        conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
    except sqlite3.Error as error:
        return f"it cannot be opened ({error})"
    try:
        return _integrity_problem(conn) or _schema_problem(conn)
    except sqlite3.OperationalError as error:  # locked, unreadable: not known to be damaged
        return f"it cannot be read as a database ({error})"
    except sqlite3.DatabaseError as error:  # a damaged page met before quick_check could say
        return f"it is damaged ({error})"
    finally:
        conn.close()


def _integrity_problem(conn: sqlite3.Connection) -> str:
    found = [row[0] for row in conn.execute("PRAGMA quick_check")]
    if found == ["ok"]:
        return ""
    first = " ".join(str(found[0]).split())  # SQLite's first finding may span lines
    return f"it is damaged ({first[:_DETAIL_CHARS]}{'...' if len(first) > _DETAIL_CHARS else ''})"


def _schema_problem(conn: sqlite3.Connection) -> str:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {"job", "job_transition", "schema_info"} <= tables:
        return "it is not an Easel job database (it has no job tables)"
    row = conn.execute("SELECT max(version) FROM schema_info").fetchone()
    version = row[0] if row else None
    if not isinstance(version, int):
        return "it is not an Easel job database (it has no schema version)"
    if version > SCHEMA_VERSION:
        return f"a newer Easel wrote it (schema {version}; this one reads up to {SCHEMA_VERSION})"
    return ""
