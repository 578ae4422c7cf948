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

from app.errors import DatabaseError
from app.models.db import Database

BACKUP_FOLDER = "backups"
BACKUPS_KEPT = 3


def backups_dir(db_path: Path) -> Path:
    return db_path.parent / BACKUP_FOLDER


def list_backups(db_path: Path) -> list[Path]:
    """Backups of the database at `db_path`, oldest first."""
    return sorted(backups_dir(db_path).glob(f"{db_path.stem}-*.db"))


def back_up(db: Database, *, keep: int = BACKUPS_KEPT, now: float | None = None) -> Path:
    """A consistent copy with SQLite's online backup API, e.g. `backups/easel-20261130-193000.db`;
    only the newest `keep` are kept. Take it after `check_database`: a damaged copy must
    never push out a good one."""
    assert db.path is not None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    folder = backups_dir(db.path)
    target = folder / f"{db.path.stem}-{stamp}.db"
    partial = target.with_suffix(".partial")
    with db.translated_errors():
        folder.mkdir(exist_ok=True)
        source = sqlite3.connect(f"file:{quote(str(db.path.resolve()))}?mode=ro", uri=True)
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)
        finally:
            copy.close()
            source.close()
        os.replace(partial, target)
    for old in list_backups(db.path)[:-keep]:
        old.unlink(missing_ok=True)
    return target


def restore_backup(db_path: Path, backup: Path | None = None) -> tuple[Path, Path]:
    """Put `backup` (default: the newest) in place of the database; the file it replaces is
    kept beside it as `<name>.damaged-<time>`. Returns (backup used, where the old file went).
    Only while no Easel process has the database open."""
    backups = list_backups(db_path)
    chosen = backup or (backups[-1] if backups else None)
    if chosen is None or not chosen.is_file():
        where = chosen or backups_dir(db_path)
        raise DatabaseError(f"There is no backup to restore at {where}", db_path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    set_aside = db_path.with_name(f"{db_path.name}.damaged-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        current = Path(f"{db_path}{suffix}")
        if current.exists():
            os.replace(current, Path(f"{set_aside}{suffix}"))
    partial = db_path.with_suffix(".restoring")
    shutil.copyfile(chosen, partial)
    os.replace(partial, db_path)
    return chosen, set_aside
