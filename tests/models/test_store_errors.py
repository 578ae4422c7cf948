"""SQLite's runtime errors become one sentence a user can act on, and nothing is written.

One test per translated error (issue 9): locked, full, read-only, corrupt. Each is the real
fault: a second process holding the lock, a tmpfs filled up, a read-only bind mount, a file
overwritten in the middle.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.errors import (
    DatabaseCorrupt,
    DatabaseLocked,
    DatabaseReadOnly,
    DiskFull,
    UserError,
    is_transient,
)
from app.models import backups
from app.models.backups import NoRoomForBackup, back_up, restore_backup
from app.models.db import PATIENT, check_database
from app.models.opening import open_database
from tests.faults import (
    damage,
    file_digest,
    fill_disk,
    read_only_view,
    release,
    small_disk,
    write_lock_held,
)


def prompts(path: Path) -> list[str]:
    """What is stored, read with plain sqlite3 (not through the code under test)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("SELECT prompt FROM job ORDER BY id")]
    finally:
        conn.close()


def assert_one_sentence(error: UserError) -> None:
    text = str(error)
    assert text and "\n" not in text and "Traceback" not in text


def stored_jobs(path: Path, count: int) -> None:
    db = open_database(path)
    queue = JobQueue(db)
    queue.submit_many([GenerationParams(f"a lighthouse number {i}, oil") for i in range(count)])
    for job_id in range(1, count // 3):
        queue.cancel(job_id)
    db.dispose()


# --- locked --------------------------------------------------------------------------------


def test_a_lock_held_by_another_process_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "easel.db"
    db = open_database(path, lock_timeout_s=0.5)
    queue = JobQueue(db)
    queue.submit(GenerationParams("before"))
    with write_lock_held(path):
        with pytest.raises(DatabaseLocked) as hot:
            queue.submit(GenerationParams("during"))  # the hot path (driver cursor)
        with pytest.raises(DatabaseLocked) as core:
            queue.set_priority(1, 5)  # the SQLAlchemy path
        assert [job.prompt for job in queue.jobs()] == ["before"]  # reads go on meanwhile
    for caught in (hot.value, core.value):
        assert_one_sentence(caught)
        assert f"{path} is locked by another program for more than 0.5 s" in str(caught)
        assert caught.transient and is_transient(caught)
    assert prompts(path) == ["before"]
    assert queue.get(1).priority == 0
    queue.submit(GenerationParams("after"))  # the lock is gone: writing works again
    assert prompts(path) == ["before", "after"]
    db.dispose()


def test_a_patient_writer_waits_out_the_lock_instead_of_failing(tmp_path: Path) -> None:
    path = tmp_path / "easel.db"
    db = open_database(path, lock_timeout_s=PATIENT)
    queue = JobQueue(db)
    job_id = queue.submit(GenerationParams("a cat"))
    assert queue.claim("w1") is not None
    with write_lock_held(path) as holder:
        # The holder lets go from a timer while report_progress is still waiting for it.
        threading.Timer(1.5, release, args=(holder,)).start()
        started = time.monotonic()
        assert queue.report_progress(job_id, "w1", 3, 20)
        assert time.monotonic() - started > 1.0  # it did wait for the lock, and did not fail
    assert queue.get(job_id).progress_step == 3
    db.dispose()


# --- full ----------------------------------------------------------------------------------


def test_a_full_disk_is_one_line_naming_the_folder_and_writes_nothing(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        path = disk / "easel.db"
        db = open_database(path)
        queue = JobQueue(db)
        queue.submit(GenerationParams("done before"))
        filler = fill_disk(disk)
        stored = 1
        with pytest.raises(DiskFull) as caught:
            for _ in range(1000):  # the write-ahead log may still have room for a few
                queue.submit(GenerationParams("x" * 1900))
                stored += 1
        assert_one_sentence(caught.value)
        assert str(caught.value).startswith(f"The disk holding {disk} is full (0 MB free)")
        assert caught.value.transient
        filler.unlink()
        assert len(prompts(path)) == stored  # the refused submit left nothing behind
        assert prompts(path)[0] == "done before"
        queue.submit(GenerationParams("after"))  # space is back: so is writing
        assert prompts(path)[-1] == "after"
        db.dispose()


def test_a_backup_that_meets_a_full_disk_leaves_no_half_copy_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21 item 9: the space a failed backup took is given back at once."""
    with small_disk(tmp_path / "disk", "3m") as disk:
        db = open_database(disk / "easel.db")
        JobQueue(db).submit_many([GenerationParams(f"{i} {'x' * 300}") for i in range(1500)])
        filler = fill_disk(disk)
        os.truncate(filler, filler.stat().st_size - 400_000)
        (disk / "backups").mkdir()
        free = shutil.disk_usage(disk).free
        # Another program takes the room after the check: the copy itself meets the full disk.
        monkeypatch.setattr(backups, "check_room_for_backup", lambda _path: None)
        with pytest.raises(DiskFull):
            back_up(db)
        assert list((disk / "backups").iterdir()) == []
        assert shutil.disk_usage(disk).free == free
        db.dispose()


def test_a_backup_is_refused_in_one_sentence_when_it_would_leave_no_headroom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = open_database(tmp_path / "easel.db")
    free = shutil.disk_usage(tmp_path).free
    monkeypatch.setattr(backups, "BACKUP_HEADROOM_BYTES", free)  # a disk this full, anywhere
    with pytest.raises(NoRoomForBackup) as refused:
        back_up(db)
    assert_one_sentence(refused.value)
    assert str(refused.value).startswith(f"No room for a backup: the disk holding {tmp_path}")
    assert not (tmp_path / "backups").exists()
    monkeypatch.setattr(backups, "BACKUP_HEADROOM_BYTES", 0)
    assert back_up(db).is_file()  # with room, the same call backs up
    db.dispose()


# --- read-only -----------------------------------------------------------------------------


def test_a_read_only_folder_is_one_line_and_reads_still_work(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    stored_jobs(folder / "easel.db", 6)
    before = file_digest(folder / "easel.db")
    with read_only_view(folder, tmp_path / "ro") as view:
        with pytest.raises(DatabaseReadOnly) as caught:
            open_database(view / "easel.db")
        assert_one_sentence(caught.value)
        assert str(caught.value).startswith(f"The data folder {view} is read-only")
        reader = open_database(view / "easel.db", read_only=True)
        queue = JobQueue(reader)
        assert len(queue.jobs()) == 6 and queue.timeline(1)[0].event == "SUBMIT"
        with pytest.raises(DatabaseReadOnly):
            queue.submit(GenerationParams("refused"))
        reader.dispose()
    assert file_digest(folder / "easel.db") == before
    assert sorted(p.name for p in folder.iterdir()) == ["easel.db"]  # no -wal, no -shm made


# --- corrupt -------------------------------------------------------------------------------


def test_a_damaged_database_is_refused_at_open_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "easel.db"
    stored_jobs(path, 500)
    damage(path, offset=126_000, size=8192)
    before = file_digest(path)
    with pytest.raises(DatabaseCorrupt) as caught:
        open_database(path, check_integrity=True)
    assert_one_sentence(caught.value)
    assert f"{path} is damaged" in str(caught.value)
    assert "python -m app db restore" in str(caught.value)
    assert file_digest(path) == before


def test_corruption_seen_while_reading_stops_every_later_write(tmp_path: Path) -> None:
    path = tmp_path / "easel.db"
    stored_jobs(path, 500)
    # Into the job table's own pages, wherever the schema put them (a fixed offset hit the
    # schema's pages each time a version added tables, and the open itself failed).
    damage(path, offset=job_table_offset(path), size=4 * 4096)
    db = open_database(path)  # no check at open: the damage shows up on a read
    queue = JobQueue(db)
    with pytest.raises(DatabaseCorrupt):
        queue.jobs(limit=None)
    before = file_digest(path)
    with pytest.raises(DatabaseCorrupt):
        queue.submit(GenerationParams("must not land in a damaged file"))
    with pytest.raises(DatabaseCorrupt):
        queue.cancel(400)
    db.dispose()
    assert file_digest(path) == before


def job_table_offset(path: Path) -> int:
    """Where the job table's B-tree starts in the file (its root page)."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'job'").fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    return (root - 1) * page_size


def test_the_newest_backup_restores_a_damaged_database(tmp_path: Path) -> None:
    path = tmp_path / "easel.db"
    stored_jobs(path, 500)
    db = open_database(path, check_integrity=True)
    for second in range(5):  # five launches: only the last three backups are kept
        back_up(db, now=1_800_000_000 + second)
    db.dispose()
    backups = sorted((tmp_path / "backups").iterdir())
    newest = [time.strftime("%Y%m%d-%H%M%S", time.localtime(1_800_000_000 + s)) for s in (2, 3, 4)]
    assert [b.name for b in backups] == [f"easel-{stamp}-000.db" for stamp in newest]
    damage(path)
    used, set_aside = restore_backup(path)
    assert used == backups[-1]
    assert set_aside.exists() and file_digest(set_aside) != file_digest(path)
    assert ".damaged-" in set_aside.name
    restored = open_database(path, check_integrity=True)
    check_database(restored)
    assert len(JobQueue(restored).jobs(limit=None)) == 500
    restored.dispose()
