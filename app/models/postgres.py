"""PostgreSQL: engine set-up, connection problems in one sentence, and what differs from SQLite.

The queue's tables and statements are the same on both backends; this module holds the few
things that are not: the driver (psycopg 3, positional `%s` parameters so the hot path's
compiled statements run on the driver's cursor), a lock that serialises schema set-up
between machines, and the translation of connection errors by their SQLSTATE.

The password never lives here: it comes from the URL the user typed (`--db`, `EASEL_DB`),
or from libpq itself (`PGPASSWORD`, `~/.pgpass`), and every message hides it.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, cast

import psycopg
import psycopg.sql
from sqlalchemy import Connection, Engine, Table, create_engine, func, insert, select, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError as SQLAlchemyDBAPIError

from app.errors import DatabaseError, DatabaseUnreachable
from app.models.database_urls import parse_url, safe_url
from app.models.db import Database
from app.models.migrations import SchemaTooNew, ensure_schema, stored_version
from app.models.tables import (
    API_JOB,
    JOB,
    JOB_FILE,
    JOB_GROUP,
    JOB_INPUT,
    JOB_NOTE,
    JOB_PARENT,
    REQUEST_KEY,
    TRANSITION,
    WORKER,
    QueueSecret,
    SchemaInfo,
)

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
# Any fixed number: every Easel on every machine takes this lock around schema set-up.
SCHEMA_LOCK_KEY = 0x45A5E1
FUNCTION_LOCK_KEY = 0x45A5E5  # creating a server-side function (`ensure_function`)
# Workers LISTEN on "easel_jobs_<schema>"; a transition that gives them something to do
# NOTIFYs "<job id> <status>" there. Channels belong to the whole database, so the schema
# in the name keeps queues that share a database (one schema each) from waking each other.
CHANNEL_PREFIX = "easel_jobs_"
NOTIFY_SQL = f"SELECT pg_notify('{CHANNEL_PREFIX}' || current_schema(), %s)"
# The server's clock: the one time every machine on the queue shares (see `StoreClock`).
SERVER_TIME_SQL = text("SELECT extract(epoch from clock_timestamp())")

# SQLSTATE -> what the user can do about it.
_SQLSTATE_MESSAGES = {
    "28P01": "the password for user {user} was refused",
    "28000": "user {user} may not connect to it (check the user name and pg_hba.conf)",
    "3D000": "the database {database} does not exist (create it with `createdb {database}`)",
    "42501": "user {user} lacks the rights to create Easel's tables",
}


@contextmanager
def scratch_schema(location: str) -> Iterator[str]:
    """A URL whose connections see only a new, empty schema, dropped afterwards (tests and
    benchmarks: a fresh store in milliseconds, where CREATE DATABASE takes most of a second).
    """
    url = parse_url(location)
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    schema = f"scratch_{uuid.uuid4().hex[:16]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
    except SQLAlchemyDBAPIError as error:
        admin.dispose()
        raise connection_error(error, url) from None
    try:
        scoped = url.update_query_dict({"options": f"-csearch_path={schema}"})
        yield scoped.render_as_string(hide_password=False)
    finally:
        with contextlib.suppress(SQLAlchemyDBAPIError), admin.connect() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        admin.dispose()


def postgres_engine(url: URL) -> Engine:
    return create_engine(
        url,
        # Positional parameters: `Database.prepare` compiles hot statements for the cursor.
        paramstyle="format",
        # A server restart closes every pooled connection; check before handing one out.
        pool_pre_ping=True,
        connect_args={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "easel"},
    )


def open_postgres(location: str) -> Database:
    """Connect, create or migrate the schema (one machine at a time), or say what is wrong."""
    url = parse_url(location)
    db = Database(postgres_engine(url), PostgresDialect())
    try:
        with _schema_lock(db.engine):
            ensure_schema(db)
    except SchemaTooNew as error:
        db.dispose()
        raise SchemaTooNew(
            f"{error.args[0].split(' Update Easel')[0]} Update Easel on this machine, or "
            "point it at another database with --db or EASEL_DB."
        ) from None
    except SQLAlchemyDBAPIError as error:
        db.dispose()
        raise connection_error(error, url) from None
    except BaseException:
        db.dispose()
        raise
    return db


def schema_version_at(location: str) -> int | None:
    """The Easel schema version of the database at `location`, None if it holds no Easel
    tables; creates and migrates nothing (a connection test must not change a database
    that may not be meant for Easel)."""
    url = parse_url(location)
    engine = postgres_engine(url)
    try:
        with engine.connect() as conn:
            return stored_version(conn)
    except SQLAlchemyDBAPIError as error:
        raise connection_error(error, url) from None
    finally:
        engine.dispose()


@contextmanager
def _schema_lock(engine: Engine) -> Iterator[None]:
    """Two machines starting at once must not both create the tables or both migrate."""
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": SCHEMA_LOCK_KEY})
            conn.commit()


def connection_error(error: SQLAlchemyDBAPIError, url: URL) -> DatabaseError:
    """One sentence for a failed connection or set-up: unreachable, refused, missing."""
    where = safe_url(url)
    sqlstate = getattr(error.orig, "sqlstate", None) or _connect_sqlstate(str(error.orig))
    template = _SQLSTATE_MESSAGES.get(sqlstate or "")
    if template is not None:
        reason = template.format(user=url.username or "(default)", database=url.database)
    elif sqlstate == _UNREACHABLE:
        reason = f"the server at {url.host or 'localhost'}:{url.port or 5432} cannot be reached"
    else:
        reason = _last_line(error.orig)
    return DatabaseError(f"Cannot open the job database {where}: {reason}.")


_UNREACHABLE = "08001"  # sqlclient_unable_to_establish_sqlconnection
# libpq reports a failed connection as text only (psycopg gives no SQLSTATE for it).
_CONNECT_FAILURES = (
    ("password authentication failed", "28P01"),
    ("no password supplied", "28P01"),
    ("no pg_hba.conf entry", "28000"),
    ("does not exist", "3D000"),  # database "x" does not exist (a missing role says "role")
    ("connection refused", _UNREACHABLE),
    ("could not translate host name", _UNREACHABLE),
    ("timeout expired", _UNREACHABLE),
    ("no route to host", _UNREACHABLE),
    ("network is unreachable", _UNREACHABLE),
)


def _connect_sqlstate(message: str) -> str | None:
    lowered = message.lower()
    if "role" in lowered and "does not exist" in lowered:
        return "28000"
    return next((state for text, state in _CONNECT_FAILURES if text in lowered), None)


def _last_line(error: Any) -> str:
    """libpq's own words, last line first: it ends with the reason (never the password)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1].rstrip(".") if lines else type(error).__name__


def _first_line(error: Any) -> str:
    """What went wrong, as libpq says it first ("server closed the connection ...")."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[0].rstrip(".") if lines else type(error).__name__


class JobListener:
    """LISTEN on the queue's channel from a connection of its own (autocommit).

    A wake-up is a hint, never the truth: whoever wakes re-reads the job table, so a
    notification lost while the server was away costs one slow poll, nothing more.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._raw: Any = None

    def wait(self, timeout_s: float) -> list[str]:
        """The payloads that arrived within `timeout_s` (empty: none, or the server is away)."""
        try:
            conn = self._connection()
            payloads = [note.payload for note in conn.notifies(timeout=timeout_s, stop_after=1)]
        except (psycopg.Error, SQLAlchemyDBAPIError) as error:
            # Said once per outage (the listener retries every tick), by the database's log.
            driver_error = error.orig if isinstance(error, SQLAlchemyDBAPIError) else error
            self._db.outage.began(
                DatabaseUnreachable(
                    f"Lost the job database {safe_url(self._db.engine.url)}: "
                    f"{_first_line(driver_error)}; listening again once it is back."
                )
            )
            self.close()
            time.sleep(timeout_s)
            return []
        self._db.outage.ended()
        return payloads

    def close(self) -> None:
        if self._raw is not None:
            # The driver's connection, not the pool's wrapper: its reset would roll back on
            # a dead socket and log a traceback (see `Database._drop_if_broken`).
            with contextlib.suppress(Exception):
                self._raw.dbapi_connection.close()
            self._raw = None

    def _connection(self) -> Any:
        if self._raw is None or is_broken(self._raw.dbapi_connection):
            self.close()
            raw = self._db.engine.raw_connection()
            raw.detach()  # ours for good: a pooled connection would stop listening when returned
            driver: Any = raw.dbapi_connection
            driver.autocommit = True
            schema = driver.execute("SELECT current_schema()").fetchone()[0]
            channel = psycopg.sql.Identifier(f"{CHANNEL_PREFIX}{schema}")
            driver.execute(psycopg.sql.SQL("LISTEN {}").format(channel))
            self._raw = raw
        return self._raw.dbapi_connection


def translate_error(error: BaseException, url: URL) -> DatabaseError | None:
    """A lost connection while working becomes `DatabaseUnreachable` (transient: reconnect);
    anything else is not for the user to fix (None: the caller re-raises it as a bug)."""
    if not isinstance(error, psycopg.OperationalError):
        return None
    sqlstate = error.sqlstate or ""
    if sqlstate and not sqlstate.startswith(("08", "57P")):  # connection, or server shutdown
        return None
    return DatabaseUnreachable(
        f"Lost the job database {safe_url(url)}: {_last_line(error)}; reconnecting."
    )


def is_broken(driver_connection: Any) -> bool:
    """A psycopg connection that the server or the network closed (restart, timeout)."""
    return bool(getattr(driver_connection, "broken", False) or driver_connection.closed)


class PostgresDialect:
    """What a PostgreSQL server does its own way (see `Dialect`): the server looks after
    its journal, its pages and their space, so those are nothing here."""

    shares_files = True  # machines share no disk: images and checkpoints go in `job_file`
    notify_sql = NOTIFY_SQL
    serialise_sql = "SELECT pg_advisory_xact_lock(%s)"
    has_clock = True  # the server's: one clock for every machine on the queue

    def location(self, db: Database) -> str:
        return db.engine.url.render_as_string(hide_password=False)

    def set_up_hot_connection(self, raw: Any) -> None:
        pass  # connections come ready from `postgres_engine`

    def begin_hot_write(self, cursor: Any, lock_timeout_s: float | None) -> None:
        pass  # psycopg opens the transaction at its first statement; row locks do the rest

    def writers_turn(self, db: Database) -> AbstractContextManager[None]:
        return contextlib.nullcontext()  # the server queues lock waiters itself

    def numbered_cursor(self, cursor: Any) -> Any:
        return psycopg.RawCursor(cursor.connection)  # `$n` SQL, sent as it is

    def unsynced(self, raw: Any) -> AbstractContextManager[None]:
        # A claim lost by the server while its worker, on another machine, runs the job
        # would let a second worker take it: the server's commit stays as configured.
        return contextlib.nullcontext()

    def dispose(self) -> None:
        pass

    def pipeline(self, raw: Any) -> AbstractContextManager[Any]:
        return cast(AbstractContextManager[Any], raw.dbapi_connection.pipeline())

    @contextmanager
    def alone(self, raw: Any) -> Iterator[None]:
        # Autocommit: the one statement is its own transaction, with no BEGIN sent first.
        connection = raw.dbapi_connection
        connection.autocommit = True
        try:
            yield
        finally:
            # A connection the server closed is dropped (`Database._drop_if_broken`): left as
            # it is, so that its error, not psycopg's refusal to switch, is the one raised.
            if connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                connection.autocommit = False

    def ensure_function(self, db: Database, name: str, definition: str) -> bool:
        """Created under a lock, so that machines starting together create it once. A user
        without the right to create it (42501) claims by statements instead."""
        exists = text("SELECT to_regproc(:name) IS NOT NULL")
        try:
            with db.write() as conn:
                if conn.execute(exists, {"name": name}).scalar_one():
                    return True
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": FUNCTION_LOCK_KEY})
                if not conn.execute(exists, {"name": name}).scalar_one():
                    conn.exec_driver_sql(definition)
            return True
        except SQLAlchemyDBAPIError as error:
            if getattr(error.orig, "sqlstate", None) != "42501":
                raise
            log.warning("could not create the function %s (%s): claiming by statements", name,
                        _first_line(error.orig))  # fmt: skip
            return False

    def translate(self, error: BaseException, db: Database) -> DatabaseError | None:
        return translate_error(error, db.engine.url)

    def is_broken(self, driver_connection: Any) -> bool:
        return is_broken(driver_connection)

    def data_version(self, conn: Connection) -> int:
        raise NotImplementedError("data_version is only available on SQLite")

    def trim_journal(self, db: Database) -> None:
        pass  # the server checkpoints and recycles its own write-ahead log

    def check_integrity(self, db: Database) -> None:
        pass  # the server checks its own pages

    def compact(self, db: Database) -> None:
        pass  # PostgreSQL's autovacuum does this on its own

    def server_time(self, conn: Connection) -> float | None:
        # clock_timestamp(), not now(): now() is the start of the transaction.
        return float(conn.execute(SERVER_TIME_SQL).scalar_one())

    def serialise(self, conn: Connection, key: int) -> None:
        """An advisory lock held until the transaction ends (claims take one of their own)."""
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


# --- copying a local queue in --------------------------------------------------------------

COPY_BATCH = 1000


class TargetNotEmpty(DatabaseError):
    pass


# Every table that holds the user's work, parents before the rows that point at them: jobs
# (a re-run's rerun_of points at an earlier job), their history, the edges of the job graph
# (a child left without them would stay BLOCKED for ever), uploaded init images, and the
# images and checkpoints already stored as bytes; the groups (batches, grids) of jobs; what
# HTTP clients asked of their jobs (a callback not yet delivered is delivered from the copy)
# and their Idempotency-Keys; the notes in their timelines.
COPIED_TABLES: tuple[Table, ...] = (
    JOB_GROUP, JOB, TRANSITION, JOB_PARENT, JOB_INPUT, JOB_FILE, API_JOB, REQUEST_KEY,
    JOB_NOTE,
)  # fmt: skip
# Not the user's data: each database has its own schema version, worker rows describe
# processes of the source's machine, which will never beat on the target, and each queue
# signs its callbacks with its own secret (the target's servers make or keep theirs; a
# receiver is given it by `serve --show-callback-secret` on the target).
NOT_COPIED = frozenset({WORKER.name, SchemaInfo.__tablename__, QueueSecret.__tablename__})


@dataclass(frozen=True)
class StoreCopy:
    """How many rows `copy_store` copied, per table."""

    rows: Mapping[str, int]

    @property
    def jobs(self) -> int:
        return self.rows[JOB.name]

    @property
    def history_rows(self) -> int:
        return self.rows[TRANSITION.name]

    @property
    def parent_links(self) -> int:
        return self.rows[JOB_PARENT.name]

    @property
    def init_images(self) -> int:
        return self.rows[JOB_INPUT.name]

    @property
    def stored_files(self) -> int:
        return self.rows[JOB_FILE.name]


def copy_store(source: Database, target: Database) -> StoreCopy:
    """Copy every job with all that belongs to it (`COPIED_TABLES`) from `source` into the
    empty `target`, ids kept so every link stays right, in one transaction (all or nothing).

    Both are at the current schema (`open_database` migrated them). A target that already
    holds jobs is refused: merging two queues would renumber jobs and break their history.
    On PostgreSQL the id sequences are moved past the copied ids, so the next job, history
    row or stored file never takes an id that is already there.
    """
    with source.read() as reading, target.write() as writing:
        if writing.execute(select(func.count()).select_from(JOB)).scalar_one():
            raise TargetNotEmpty(
                f"{safe_url(target.location)} already holds jobs; copy into an empty database"
            )
        rows = {table.name: _copy_table(reading, writing, table) for table in COPIED_TABLES}
        if not target.is_sqlite:
            for table in COPIED_TABLES:
                if "id" in table.c:  # job_parent and job_input are keyed by their job
                    _advance_id_sequence(writing, table)
    return StoreCopy(rows)


def _copy_table(reading: Connection, writing: Connection, table: Table) -> int:
    # In key order: a re-run's rerun_of points at an earlier job, already copied.
    rows = reading.execute(select(table).order_by(*table.primary_key.columns))
    copied = 0
    while batch := rows.fetchmany(COPY_BATCH):
        writing.execute(insert(table), [dict(row._mapping) for row in batch])
        copied += len(batch)
    return copied


def _advance_id_sequence(conn: Connection, table: Table) -> None:
    """Rows copied with their ids leave the id sequence at 1; the next job must not reuse one."""
    conn.execute(
        text(
            f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
            f"COALESCE((SELECT MAX(id) FROM {table.name}), 0) + 1, false)"
        )
    )
