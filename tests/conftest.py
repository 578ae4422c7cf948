"""Shared fixtures: a private data folder and a real SQLite file for every test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Qt must never look for a display in tests; set before any Qt import.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app.engine.queue import JobQueue
from app.models.db import Database, open_database


@pytest.fixture(autouse=True)
def easel_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data folder: nothing touches the user's real one."""
    home = tmp_path / "easel-home"
    monkeypatch.setenv("EASEL_HOME", str(home))
    return home


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = open_database(tmp_path / "jobs.db")
    yield database
    database.dispose()


@pytest.fixture
def queue(db: Database) -> JobQueue:
    return JobQueue(db)
