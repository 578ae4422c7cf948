"""A queue shared by several machines: trying a PostgreSQL URL before using it, and keeping
its password where libpq finds it (never in the settings, see `app.models.pgpass`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL

from app.engine.queue import OpenFor, open_queue
from app.engine.states import JobStatus
from app.errors import DatabaseError
from app.models.pgpass import PasswordRefused, has_password, remember_password
from app.models.postgres import is_database_url, parse_url, safe_url

WAITING = (JobStatus.PENDING, JobStatus.PROCESSING)


@dataclass(frozen=True)
class QueueProbe:
    """What a successful connection found."""

    where: str  # the URL without its password
    jobs: int
    waiting: int  # pending or running


def probe_queue(url: str, password: str = "") -> QueueProbe:
    """Connect to the queue at `url` as the window would, and count its jobs.

    `password`: used for this connection only; empty lets libpq find one (PGPASSWORD, its
    password file). Creates Easel's tables on an empty database, as the first launch on it
    would. Raises `DatabaseError` with one sentence saying what is wrong.
    """
    queue = open_queue(_with_password(url, password), OpenFor.READING)
    try:
        counts = queue.count_by_status()
    finally:
        queue.db.dispose()
    return QueueProbe(
        where=safe_url(url),
        jobs=sum(counts.values()),
        waiting=sum(counts.get(status, 0) for status in WAITING),
    )


def save_password(url: str, password: str) -> Path:
    """Keep `password` for `url` in libpq's password file; returns that file."""
    try:
        return remember_password(_parsed(url), password)
    except PasswordRefused as refused:
        raise DatabaseError(f"The password was not saved: {refused}.") from None
    except OSError as error:
        raise DatabaseError(f"The password was not saved: {error}.") from None


def password_saved(url: str) -> bool:
    """Whether libpq will find a password for `url` in its file (False for a bad URL)."""
    try:
        return has_password(_parsed(url))
    except (DatabaseError, OSError):
        return False


def _with_password(url: str, password: str) -> str:
    parsed = _parsed(url)
    if password:
        parsed = parsed.set(password=password)
    return parsed.render_as_string(hide_password=False)


def _parsed(url: str) -> URL:
    if not is_database_url(url):
        raise DatabaseError(f"{safe_url(url)} is not a postgresql:// URL.")
    return parse_url(url)
