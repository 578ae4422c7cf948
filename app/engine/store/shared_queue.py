"""A queue shared by several machines: trying a PostgreSQL URL before using it, and keeping
its password where libpq finds it (never in the settings, see `app.models.pgpass`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sqlalchemy.engine import URL

from app.engine import paths
from app.engine.jobs.states import JobStatus
from app.engine.store.opening import OpenFor, open_queue
from app.engine.store.stored_files import copy_local_files
from app.errors import DatabaseError
from app.models.database_urls import is_database_url, parse_url, safe_url
from app.models.migrations import SCHEMA_VERSION, SchemaTooNew
from app.models.opening import open_database
from app.models.pgpass import PasswordRefused, has_password, remember_password

WAITING = (JobStatus.PENDING, JobStatus.PROCESSING)


class Found(StrEnum):
    """What a connection test found in the database."""

    QUEUE = "queue"  # Easel's tables, as this version writes them: `jobs` and `waiting` tell
    EMPTY = "empty"  # no Easel tables yet: created at the next start
    OLDER = "older"  # an older Easel's tables: updated at the next start


@dataclass(frozen=True)
class QueueProbe:
    """What a successful connection found."""

    where: str  # the URL without its password
    found: Found
    jobs: int = 0
    waiting: int = 0  # pending or running


def probe_queue(url: str, password: str = "") -> QueueProbe:
    """Connect to the queue at `url` as the window would, and say what is there.

    `password`: used for this connection only; empty lets libpq find one (PGPASSWORD, its
    password file). Creates and migrates nothing. Raises `DatabaseError` with one sentence
    saying what is wrong (unreachable, refused, missing, written by a newer Easel).
    """
    from app.models.postgres import schema_version_at  # the driver only when asked

    location = _with_password(url, password)
    version = schema_version_at(location)
    where = safe_url(url)
    if version is None:
        return QueueProbe(where, Found.EMPTY)
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{where} was written by a newer Easel (schema {version}; this version "
            f"understands up to {SCHEMA_VERSION}): update Easel on this machine first."
        )
    if version < SCHEMA_VERSION:
        return QueueProbe(where, Found.OLDER)
    queue = open_queue(location, OpenFor.READING)  # up to date: opening changes nothing
    try:
        counts = queue.count_by_status()
    finally:
        queue.db.dispose()
    waiting = sum(counts.get(status, 0) for status in WAITING)
    return QueueProbe(where, Found.QUEUE, jobs=sum(counts.values()), waiting=waiting)


@dataclass(frozen=True)
class Copied:
    """What `copy_local_queue` copied into the shared database."""

    where: str  # the URL without its password
    jobs: int
    history_rows: int
    parent_links: int  # edges of the job graph: what BLOCKED jobs wait for
    init_images: int  # uploaded init images of img2img jobs
    files: int  # images of finished jobs, checkpoints of paused ones


def copy_local_queue(url: str, password: str = "", source: Path | None = None) -> Copied:
    """Copy this machine's SQLite queue (`source`, default the data folder's) into the empty
    database at `url`: every job with its id, history, parent links and uploaded init image
    (`copy_store`), then the images and pause checkpoints on this machine's disk.

    All rows or none; a database that already holds jobs is refused.
    Raises `DatabaseError` with one sentence saying what is wrong.
    """
    source = source or paths.database_path()
    if not source.is_file():
        raise DatabaseError(f"There is no job database at {source} to copy.")
    from app.models.postgres import copy_store

    local = open_database(source, read_only=True)
    try:
        shared = open_database(_with_password(url, password))
        try:
            rows = copy_store(local, shared)
            files = copy_local_files(local, shared)
        finally:
            shared.dispose()
    finally:
        local.dispose()
    return Copied(
        safe_url(url), rows.jobs, rows.history_rows, rows.parent_links, rows.init_images,
        files + rows.stored_files,
    )  # fmt: skip


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
