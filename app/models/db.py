"""The database: engine set-up, SQLite pragmas, transactions and the schema version.

Everything SQLite-specific lives here, so the rest of the code speaks portable
SQLAlchemy and can later run on PostgreSQL unchanged.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.exc import OperationalError
from sqlmodel import SQLModel

from app.models.tables import SchemaInfo

SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 10_000
_READ_ONLY = "easel_read_only"


class DatabaseError(Exception):
    """A problem with the database file the user can act on (not a bug)."""


class SchemaTooNew(DatabaseError):
    pass


class Database:
    """One engine plus the two kinds of unit of work: `write()` and `read()`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that takes the write lock up front (SQLite: BEGIN IMMEDIATE).

        Taking it at BEGIN, not at the first write, means a read-then-write can never
        fail half way with "database is locked" after busy_timeout was skipped.
        """
        with self.engine.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            conn = conn.execution_options(**{_READ_ONLY: True})
            with conn.begin():
                yield conn

    def data_version(self, conn: Connection) -> int:
        """A number that changes whenever another connection commits (cheap to poll)."""
        if not self.is_sqlite:
            raise NotImplementedError("data_version is only available on SQLite")
        return int(conn.exec_driver_sql("PRAGMA data_version").scalar_one())

    def dispose(self) -> None:
        self.engine.dispose()


def open_database(path: Path | str) -> Database:
    """Open (creating if needed) the database at `path` and bring its schema up to date."""
    db = Database(_sqlite_engine(Path(path)))
    try:
        ensure_schema(db)
    except OperationalError as error:
        db.dispose()
        raise DatabaseError(f"Cannot open the job database {path}: {error.orig}") from error
    except Exception:
        db.dispose()
        raise
    return db


def _sqlite_engine(path: Path) -> Engine:
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        f"sqlite:///{path}",
        connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
    )
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin_sqlite_transaction)
    return engine


def _configure_sqlite_connection(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event, not pysqlite, decide how transactions start.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _begin_sqlite_transaction(conn: Connection) -> None:
    read_only = conn.get_execution_options().get(_READ_ONLY, False)
    conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


# --- schema version -------------------------------------------------------------------------

# version -> the step that brings a database at that version to version + 1.
Migration = Callable[[Connection], None]


def _v1_to_v2(conn: Connection) -> None:
    # Version 2 added the retry policy's "given up" flag and the watchdog's index.
    conn.exec_driver_sql("ALTER TABLE job ADD COLUMN given_up BOOLEAN NOT NULL DEFAULT 0")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_job_heartbeat ON job (status, heartbeat_at)"
    )


MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2}


def ensure_schema(db: Database) -> int:
    """Create a new schema, migrate an older one, refuse a newer one. Returns the version."""
    with db.write() as conn:
        version = _stored_version(conn)
        if version is None:
            SQLModel.metadata.create_all(conn)
            _store_version(conn, SCHEMA_VERSION, insert=True)
            return SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"The job database was written by a newer Easel (schema {version}; this "
                f"version understands up to {SCHEMA_VERSION}). Update Easel, or point it at "
                "another data folder with EASEL_HOME or --home."
            )
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](conn)
            version += 1
        _store_version(conn, version, insert=False)
        return version


def stored_schema_version(db: Database) -> int | None:
    with db.read() as conn:
        return _stored_version(conn)


def _stored_version(conn: Connection) -> int | None:
    if not inspect(conn).has_table(SchemaInfo.__tablename__):
        return None
    return conn.execute(text("SELECT version FROM schema_info WHERE id = 1")).scalar_one_or_none()


def _store_version(conn: Connection, version: int, *, insert: bool) -> None:
    sql = (
        "INSERT INTO schema_info (id, version) VALUES (1, :v)"
        if insert
        else "UPDATE schema_info SET version = :v WHERE id = 1"
    )
    conn.execute(text(sql), {"v": version})
