"""The database: engine set-up, SQLite pragmas, transactions and the schema version.

Everything SQLite-specific lives here, so the rest of the code speaks portable
SQLAlchemy and can later run on PostgreSQL unchanged.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.exc import DatabaseError as SQLAlchemyDatabaseError
from sqlalchemy.sql.expression import ClauseElement
from sqlmodel import SQLModel

from app.models.tables import JOB_INPUT, JOB_PARENT, SchemaInfo

SCHEMA_VERSION = 4
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
        # One driver connection per thread for hot writes, kept open: a pool checkout and
        # check-in cost a third of a whole SQLite transaction.
        self._local = threading.local()
        self._hot_connections: list[Any] = []
        self._lock = threading.Lock()

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
        with self.read_only_connection() as conn, conn.begin():
            yield conn

    def read_only_connection(self) -> Connection:
        """A connection whose transactions never take the write lock (SQLite: plain BEGIN).

        For callers that keep one open, e.g. to poll `data_version`, which only compares
        commits seen from the same connection. The caller closes it."""
        return self.engine.connect().execution_options(**{_READ_ONLY: True})

    @contextmanager
    def hot_write(self) -> Iterator[HotTransaction]:
        """`write()` for the hot paths: the driver's own cursor, statements compiled once.

        SQLAlchemy's per-statement execution costs several times what SQLite spends on the
        whole transaction; a claim or a transition runs thousands of times a second.
        """
        raw = self._hot_connection()
        cursor = raw.cursor()
        if self.is_sqlite:
            _begin_immediate(cursor)
        try:
            yield HotTransaction(cursor)
        except BaseException:
            raw.rollback()
            raise
        raw.commit()

    def _hot_connection(self) -> Any:
        raw = getattr(self._local, "connection", None)
        if raw is None:
            raw = self.engine.raw_connection()
            raw.detach()  # this thread's for good, not the pool's
            if self.is_sqlite:
                raw.execute("PRAGMA busy_timeout=0")  # _begin_immediate does the waiting
            self._local.connection = raw
            with self._lock:
                self._hot_connections.append(raw)
        return raw

    def prepare(
        self, statement: ClauseElement, column_keys: Sequence[str] | None = None
    ) -> Prepared:
        """Compile a Core statement once for this database's dialect."""
        compiled: Any = statement.compile(
            dialect=self.engine.dialect, column_keys=list(column_keys) if column_keys else None
        )
        if compiled.positiontup is None:
            raise ValueError("hot-path statements need a positional driver (SQLite: qmark)")
        # Literals written into the statement (status='PROCESSING') become bound values too.
        fixed = {
            name: value
            for name, value in compiled.params.items()
            if not compiled.binds[name].required
        }
        return Prepared(compiled.string, tuple(compiled.positiontup), fixed)

    def data_version(self, conn: Connection) -> int:
        """A number that changes whenever another connection commits (cheap to poll)."""
        if not self.is_sqlite:
            raise NotImplementedError("data_version is only available on SQLite")
        return int(conn.exec_driver_sql("PRAGMA data_version").scalar_one())

    def dispose(self) -> None:
        with self._lock:
            hot, self._hot_connections = self._hot_connections, []
        for raw in hot:
            raw.close()
        self._local = threading.local()
        self.engine.dispose()


@dataclass(frozen=True)
class Prepared:
    sql: str
    parameter_names: tuple[str, ...]
    fixed_values: Mapping[str, Any]


class HotTransaction:
    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, statement: Prepared, params: Mapping[str, Any]) -> Any:
        """Run on the driver cursor; returns it (rowcount, fetchone, description)."""
        fixed = statement.fixed_values
        values = [
            params[name] if name in params else fixed[name] for name in statement.parameter_names
        ]
        self._cursor.execute(statement.sql, values)
        return self._cursor


def open_database(path: Path | str) -> Database:
    """Open (creating if needed) the database at `path` and bring its schema up to date."""
    db = Database(_sqlite_engine(Path(path)))
    try:
        ensure_schema(db)
    except SQLAlchemyDatabaseError as error:  # locked, read-only, corrupt, not a database
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


def _begin_immediate(cursor: sqlite3.Cursor) -> None:
    """BEGIN IMMEDIATE, waiting for the write lock with short sleeps of our own.

    SQLite's busy handler sleeps 1, 2, 5, 10... ms between tries: with several workers
    claiming at once, most of their time went to sleeping past a lock already free. Hot
    connections therefore run with busy_timeout=0; in WAL mode, once BEGIN IMMEDIATE
    holds the write lock, nothing inside the transaction waits for a lock again.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.0001
    while True:
        try:
            cursor.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as error:
            if not _is_busy(error) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.004)


def _is_busy(error: sqlite3.OperationalError) -> bool:
    return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY or "locked" in str(error)


def _begin_sqlite_transaction(conn: Connection) -> None:
    read_only = conn.get_execution_options().get(_READ_ONLY, False)
    # Straight to the driver: BEGIN needs none of SQLAlchemy's statement machinery.
    driver = conn.connection.driver_connection
    assert driver is not None
    driver.execute("BEGIN" if read_only else "BEGIN IMMEDIATE")


# --- schema version -------------------------------------------------------------------------

# version -> the step that brings a database at that version to version + 1.
Migration = Callable[[Connection], None]


def _v1_to_v2(conn: Connection) -> None:
    # Version 2 added the retry policy's "given up" flag and the watchdog's index.
    conn.exec_driver_sql("ALTER TABLE job ADD COLUMN given_up BOOLEAN NOT NULL DEFAULT 0")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_job_heartbeat ON job (status, heartbeat_at)"
    )


def _v2_to_v3(conn: Connection) -> None:
    # Placeholder: helper "store" adds the real 2 -> 3 step on its branch (merged by the lead).
    pass


def _v3_to_v4(conn: Connection) -> None:
    # Version 4 added dependent jobs (job_parent) and img2img (job_input, two job columns).
    conn.exec_driver_sql("ALTER TABLE job ADD COLUMN init_image VARCHAR NOT NULL DEFAULT ''")
    conn.exec_driver_sql("ALTER TABLE job ADD COLUMN strength FLOAT NOT NULL DEFAULT 1.0")
    SQLModel.metadata.create_all(conn, tables=[JOB_PARENT, JOB_INPUT])


MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}


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
