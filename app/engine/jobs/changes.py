"""Noticing that anyone committed, without reading any job: what the window polls."""

from __future__ import annotations

from sqlalchemy import Connection

from app.models.db import Database


class ChangeWatcher:
    """`version()` changes whenever anyone (any process) commits to the store; it is None
    where the store cannot say (PostgreSQL), and the caller then reads to find out.

    SQLite's `data_version` only compares commits seen from one connection, so the watcher
    keeps its own, read-only, until `close`."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._conn: Connection | None = None

    def version(self) -> int | None:
        if not self._db.is_sqlite:
            return None
        with self._db.translated_errors():  # a locked or vanished file: app.errors
            if self._conn is None:
                self._conn = self._db.read_only_connection()
            with self._conn.begin():
                return self._db.data_version(self._conn)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
