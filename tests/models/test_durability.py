"""An acknowledged job survives a power cut: every SQLite connection Easel opens commits with
`synchronous=FULL`, and every rename that records a result is followed by a flush of its
folder. No power can be cut in a test, so these check the settings and the order of flushes
on real files; `benchmarks/security.py` measures what they cost."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.durable import atomic_write, durable_replace
from app.engine.history.search import JobFilter, search
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.engine.settings import Settings, save_settings
from app.models.backups import back_up, restore_backup
from app.models.db import SYNCHRONOUS_ENV
from app.models.opening import open_database

FULL = 2  # what `PRAGMA synchronous` reads back for FULL


class Opened:
    """Every sqlite3 connection made while it listens, each asked its `synchronous` as it
    closes (or at the end, if still open): the setting it committed with."""

    def __init__(self) -> None:
        self.levels: list[int] = []
        self.open: list[sqlite3.Connection] = []

    def factory(self) -> type[sqlite3.Connection]:
        opened = self

        class Recording(sqlite3.Connection):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                opened.open.append(self)

            def close(self) -> None:
                if self in opened.open:
                    opened.open.remove(self)
                    opened.levels.append(self.execute("PRAGMA synchronous").fetchone()[0])
                super().close()

        return Recording

    def settle(self) -> list[int]:
        for conn in list(self.open):
            conn.close()
        return self.levels


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[Opened]:
    monkeypatch.delenv(SYNCHRONOUS_ENV, raising=False)
    recorder = Opened()
    connect = sqlite3.connect

    def recording_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return connect(*args, **kwargs, factory=recorder.factory())

    monkeypatch.setattr(sqlite3, "connect", recording_connect)
    monkeypatch.setattr(sqlite3.dbapi2, "connect", recording_connect)  # SQLAlchemy's
    yield recorder
    recorder.settle()


def test_every_sqlite_connection_the_app_opens_commits_with_synchronous_full(
    tmp_path: Path, opened: Opened
) -> None:
    path = tmp_path / "easel.db"
    db = open_database(path)  # a new file: the first connection makes it
    queue = JobQueue(db)
    job_id = queue.submit(GenerationParams("a red circle", seed=1))
    queue.fire(job_id, JobEvent.PAUSE, source="test")
    assert queue.claim("w1") is None  # the claim statement, on its hot connection
    assert [job.id for job in search(queue, JobFilter(text="circle"))] == [job_id]  # FTS5
    backup = back_up(db)  # its copy is written by a connection of its own
    db.dispose()
    reader = open_database(path, read_only=True)
    assert len(JobQueue(reader).jobs(limit=None)) == 1
    reader.dispose()
    restore_backup(path, backup)
    levels = opened.settle()
    assert len(levels) >= 4
    assert set(levels) == {FULL}, f"synchronous levels seen: {levels}"


def test_normal_is_only_what_a_benchmark_asks_for(
    tmp_path: Path, opened: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison's switch works (so the measured cost is FULL's), and reads no other
    value than SQLite's own levels: anything else stays FULL."""
    monkeypatch.setenv(SYNCHRONOUS_ENV, "normal")
    open_database(tmp_path / "normal.db").dispose()
    assert 1 in opened.settle()
    opened.levels.clear()
    monkeypatch.setenv(SYNCHRONOUS_ENV, "OFF")
    open_database(tmp_path / "off.db").dispose()
    assert set(opened.settle()) == {FULL}


class Flushes:
    """`os.fsync` as it was, and which files and folders it was asked to flush, in order:
    (device, inode) of each, and whether the rename's target existed at that moment."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.flushed: list[tuple[int, int]] = []
        self.target_existed: list[bool] = []

    def fsync(self, fd: int) -> None:
        info = os.fstat(fd)
        self.flushed.append((info.st_dev, info.st_ino))
        self.target_existed.append(self.target.exists())
        _real_fsync(fd)

    def when_folder_flushed(self, folder: Path) -> list[bool]:
        """For each flush of `folder`: did the target exist then (the rename was done)?"""
        key = _identity(folder)
        pairs = zip(self.flushed, self.target_existed, strict=True)
        return [seen for flushed, seen in pairs if flushed == key]


_real_fsync = os.fsync


def _identity(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_dev, info.st_ino


@pytest.fixture
def flushes(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], Flushes]:
    def watching(target: Path) -> Flushes:
        recorder = Flushes(target)
        monkeypatch.setattr(os, "fsync", recorder.fsync)
        return recorder

    return watching


def test_durable_replace_flushes_the_file_then_renames_then_flushes_its_folder(
    tmp_path: Path, flushes: Callable[[Path], Flushes]
) -> None:
    temp, final = tmp_path / ".result.tmp", tmp_path / "result.png"
    temp.write_bytes(b"the image")
    file_key = _identity(temp)
    seen = flushes(final)
    durable_replace(temp, final)
    assert final.read_bytes() == b"the image" and not temp.exists()
    assert seen.flushed[0] == file_key and not seen.target_existed[0]  # before the rename
    assert seen.when_folder_flushed(tmp_path) == [True]  # after it


def test_a_rename_across_folders_flushes_both(
    tmp_path: Path, flushes: Callable[[Path], Flushes]
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    temp, final = tmp_path / "a" / "job-1.ckpt", tmp_path / "b" / "job-1.ckpt"
    temp.write_bytes(b"progress")
    seen = flushes(final)
    durable_replace(temp, final)
    assert seen.when_folder_flushed(tmp_path / "b") == [True]
    assert seen.when_folder_flushed(tmp_path / "a") == [True]


def _image(path: Path) -> None:
    atomic_write(path, lambda handle: handle.write(b"png bytes"))


def _settings(path: Path) -> None:
    save_settings(Settings(), path)


@pytest.mark.parametrize("write", [_image, _settings], ids=["image", "settings"])
def test_a_written_result_is_followed_by_a_flush_of_its_folder(
    tmp_path: Path, flushes: Callable[[Path], Flushes], write: Callable[[Path], None]
) -> None:
    final = tmp_path / "out" / "result"
    final.parent.mkdir()
    seen = flushes(final)
    write(final)
    assert final.exists()
    assert seen.when_folder_flushed(final.parent) == [True]


def test_a_backup_and_a_restore_flush_the_folder_they_rename_in(
    tmp_path: Path, flushes: Callable[[Path], Flushes]
) -> None:
    path = tmp_path / "easel.db"
    db = open_database(path)
    JobQueue(db).submit(GenerationParams("a red circle", seed=1))
    (tmp_path / "backups").mkdir()
    seen = flushes(tmp_path / "backups" / "never")
    backup = back_up(db)
    db.dispose()
    assert _identity(backup.parent) in seen.flushed
    seen = flushes(path)
    restore_backup(path, backup)
    assert seen.when_folder_flushed(tmp_path) == [True]
