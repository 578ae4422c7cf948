"""PostgreSQL: engine set-up, connection problems in one sentence, and what differs from SQLite.

The queue's tables and statements are the same on both backends; this module holds the few
things that are not: the driver (psycopg 3, positional `%s` parameters so the hot path's
compiled statements run on the driver's cursor), a lock that serialises schema set-up
between machines, and the translation of connection errors by their SQLSTATE.

The password never lives here: it comes from the URL the user typed (`--db`, `EASEL_DB`),
or from libpq itself (`PGPASSWORD`, `~/.pgpass`), and every message hides it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.exc import DBAPIError as SQLAlchemyDBAPIError

from app.models.db import Database, DatabaseError, SchemaTooNew, ensure_schema

SCHEMES = ("postgresql", "postgres")
DRIVER = "postgresql+psycopg"
CONNECT_TIMEOUT_S = 10
# Any fixed number: every Easel on every machine takes this lock around schema set-up.
SCHEMA_LOCK_KEY = 0x45A5E1

# SQLSTATE -> what the user can do about it.
_SQLSTATE_MESSAGES = {
    "28P01": "the password for user {user} was refused",
    "28000": "user {user} may not connect (check pg_hba.conf)",
    "3D000": "the database {database} does not exist (create it with `createdb {database}`)",
    "42501": "user {user} lacks the rights to create Easel's tables",
}


def is_database_url(location: str) -> bool:
    """A PostgreSQL URL rather than the path of a SQLite file."""
    scheme = location.partition("://")[0].split("+")[0].lower()
    return "://" in location and scheme in SCHEMES


def parse_url(location: str) -> URL:
    """The URL with Easel's driver; libpq parameters (sslmode, ...) pass through the query."""
    try:
        url = make_url(location)
    except ArgumentError as error:
        raise DatabaseError(f"{safe_url(location)} is not a database URL: {error}") from None
    if not url.database:
        raise DatabaseError(f"{safe_url(location)} names no database (…/DATABASE at the end)")
    return url.set(drivername=DRIVER)


def safe_url(location: str | URL) -> str:
    """The URL as it may be shown or logged: never with its password."""
    try:
        url = location if isinstance(location, URL) else make_url(location)
    except ArgumentError:
        return "the database URL"
    return url.set(drivername=url.drivername.split("+")[0]).render_as_string(hide_password=True)


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
    db = Database(postgres_engine(url))
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
    sqlstate = getattr(error.orig, "sqlstate", None)
    template = _SQLSTATE_MESSAGES.get(sqlstate or "")
    if template is not None:
        reason = template.format(user=url.username or "(default)", database=url.database)
    elif sqlstate is None:
        # No SQLSTATE: the server was never reached (refused, unknown host, timeout).
        reason = f"the server at {url.host or 'localhost'}:{url.port or 5432} cannot be reached"
    else:
        reason = _first_line(error.orig)
    return DatabaseError(f"Cannot open the job database {where}: {reason}.")


def _first_line(error: Any) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def is_broken(driver_connection: Any) -> bool:
    """A psycopg connection that the server or the network closed (restart, timeout)."""
    return bool(getattr(driver_connection, "broken", False) or driver_connection.closed)
