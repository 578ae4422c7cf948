"""Opening the job database: the one place that tells a SQLite file from a PostgreSQL URL.

The store's dialect is chosen here, once; from then on `Database` asks it (see `db`).
"""

from __future__ import annotations

from pathlib import Path

from app.models.database_urls import is_database_url
from app.models.db import LOCK_TIMEOUT_S, Database
from app.models.sqlite import open_sqlite


def open_database(
    path: Path | str,
    *,
    read_only: bool = False,
    lock_timeout_s: float | None = LOCK_TIMEOUT_S,
    check_integrity: bool = False,
) -> Database:
    """Open the database at `path` and bring its schema up to date (creating it if needed).

    `read_only`: never write, never take the write lock (works on a read-only folder and
    while another program holds the lock); an older schema is then migrated by a writable
    open first. `lock_timeout_s`: how long a write waits for the lock (`PATIENT`: as long
    as it takes). `check_integrity`: refuse a damaged file (`DatabaseCorrupt`) before use.

    `path` may also be a PostgreSQL URL (see `postgres`); the SQLite options do not apply.
    """
    if is_database_url(str(path)):
        from app.models.postgres import open_postgres  # the driver only for a URL

        return open_postgres(str(path))
    return open_sqlite(
        Path(path),
        read_only=read_only,
        lock_timeout_s=lock_timeout_s,
        check_integrity=check_integrity,
    )
