"""PostgreSQL URLs as text: told from a SQLite path, parsed, shown without the password.

Apart from `postgres` so that what only looks at a location (settings, the Settings
dialog, opening a SQLite file) does not load the PostgreSQL driver: psycopg is a tenth of
the window's start-up otherwise, for a store most users never use.
"""

from __future__ import annotations

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from app.errors import DatabaseError

SCHEMES = ("postgresql", "postgres")
DRIVER = "postgresql+psycopg"


def is_database_url(location: str) -> bool:
    """A PostgreSQL URL rather than the path of a SQLite file."""
    scheme = location.partition("://")[0].split("+")[0].lower()
    return "://" in location and scheme in SCHEMES


def parse_url(location: str) -> URL:
    """The URL with Easel's driver; libpq parameters (sslmode, ...) pass through the query."""
    try:
        url = make_url(location)
    except (ArgumentError, ValueError) as error:  # ValueError: a port that is not a number
        raise DatabaseError(f"{safe_url(location)} is not a database URL: {error}") from None
    if not url.database:
        raise DatabaseError(f"{safe_url(location)} names no database (…/DATABASE at the end)")
    return url.set(drivername=DRIVER)


def safe_url(location: str | URL) -> str:
    """The URL as it may be shown or logged: never with its password."""
    try:
        url = location if isinstance(location, URL) else make_url(location)
    except (ArgumentError, ValueError):
        return "the database URL"
    return url.set(drivername=url.drivername.split("+")[0]).render_as_string(hide_password=True)
