"""Shared fixtures: a private data folder and a real store for every test.

The store is a SQLite file; in modules marked `both_backends` each test runs twice, once
on SQLite and once on a fresh PostgreSQL schema (see `tests.pg`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Qt must never look for a display in tests; set before any Qt import.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app.engine.jobs.queue import JobQueue
from app.engine.settings import DB_ENV
from app.models.db import Database
from app.models.opening import open_database
from tests import pg


@pytest.fixture(autouse=True)
def easel_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data folder: nothing touches the user's real one."""
    home = tmp_path / "easel-home"
    monkeypatch.setenv("EASEL_HOME", str(home))
    # The local SQLite store unless a test asks otherwise (`--db` sets it for the process).
    monkeypatch.delenv(DB_ENV, raising=False)
    return home


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marked = metafunc.definition.get_closest_marker
    if "backend" not in metafunc.fixturenames or not marked("both_backends"):
        return
    if marked("postgresql_only"):
        metafunc.parametrize("backend", ("postgresql",), indirect=True)
    elif not marked("sqlite_only"):
        metafunc.parametrize("backend", pg.BACKENDS, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """ "sqlite" or "postgresql"; SQLite outside `both_backends` modules."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def db_location(backend: str, tmp_path: Path) -> Iterator[str]:
    """A fresh store: a SQLite file, or a PostgreSQL URL scoped to a new schema."""
    with pg.location(backend, str(tmp_path / "jobs.db")) as location:
        yield location


@pytest.fixture
def db(db_location: str) -> Iterator[Database]:
    database = open_database(db_location)
    yield database
    database.dispose()


@pytest.fixture
def queue(db: Database) -> JobQueue:
    return JobQueue(db)
