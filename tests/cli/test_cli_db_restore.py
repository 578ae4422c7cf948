"""`db restore` checks what it puts back and who uses what it replaces (issue 21 items 4, 5
and 10): a file that is not an intact Easel database, or a database a live window or worker
has open, is refused before anything is swapped; a healthy file is never called damaged."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from PIL import Image

from app.models.backups import back_up, list_backups, restore_backup
from app.models.opening import open_database
from tests.cli.test_cli_faults import app_command, assert_one_line_error, jobs_in, stored_count
from tests.faults import damage, file_digest

EXIT_REFUSED, EXIT_STORE = 2, 1
ROOT = Path(__file__).resolve().parents[2]


def not_a_database(tmp_path: Path, kind: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    if kind == "png":
        path = tmp_path / "picture.png"
        Image.new("RGB", (8, 8), "red").save(path)
    elif kind == "other program":
        path = tmp_path / "notes.db"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE note (text TEXT)")
    else:  # a damaged copy of a real backup
        path = tmp_path / "damaged.db"
        jobs_in(tmp_path, 500)
        db = open_database(tmp_path / "easel.db")
        path.write_bytes(back_up(db).read_bytes())
        db.dispose()
        damage(path)
    return path


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("png", "it is not a SQLite database"),
        ("other program", "it is not an Easel job database (it has no job tables)"),
        ("damaged copy", "it is damaged"),
    ],
)
def test_a_file_that_is_not_an_intact_easel_database_is_refused_and_nothing_changes(
    easel_home: Path, tmp_path: Path, kind: str, reason: str
) -> None:
    jobs_in(easel_home, 3)
    database = easel_home / "easel.db"
    before = file_digest(database)
    candidate = not_a_database(tmp_path / "elsewhere", kind)

    line = assert_one_line_error(app_command(easel_home, "db", "restore", str(candidate)),
                                 EXIT_STORE)  # fmt: skip

    assert f"{candidate} cannot be restored: {reason}" in line
    assert "nothing was changed" in line
    assert file_digest(database) == before and stored_count(easel_home) == 3
    assert set_aside(easel_home) == []


def test_a_healthy_database_that_is_replaced_is_kept_as_replaced_not_damaged(
    easel_home: Path,
) -> None:
    jobs_in(easel_home, 2)
    assert app_command(easel_home, "db", "backup").returncode == 0
    jobs_in(easel_home, 3)

    restored = app_command(easel_home, "db", "restore")

    assert restored.returncode == 0, restored.stderr
    [kept] = set_aside(easel_home)
    assert ".replaced-" in kept.name
    assert stored_count(easel_home) == 2


def set_aside(home: Path) -> list[Path]:
    """The database files a restore kept aside (without their -wal and -shm)."""
    return [p for p in home.glob("easel.db.*-*") if not p.name.endswith(("-wal", "-shm"))]


HOLDER = {
    "window": "from app.engine.crash import SessionGuard\nheld = SessionGuard('gui', home)\n"
              "held.open()",
    "worker": "from app.engine.workers.liveness import LivenessLock, new_token\n"
              "held = LivenessLock(home / 'workers', new_token()).__enter__()",
}  # fmt: skip


@contextmanager
def live(kind: str, home: Path) -> Iterator[None]:
    """A real process holding what a live window or worker holds on `home`."""
    code = f"import sys, time\nfrom pathlib import Path\nhome = Path({str(home)!r})\n"
    code += HOLDER[kind] + "\nprint('ready', flush=True)\ntime.sleep(120)\n"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        yield
    finally:
        holder.kill()
        holder.wait(timeout=30)


@pytest.mark.parametrize("kind", ["window", "worker"])
def test_a_restore_under_a_live_window_or_worker_is_refused(easel_home: Path, kind: str) -> None:
    jobs_in(easel_home, 2)
    assert app_command(easel_home, "db", "backup").returncode == 0
    jobs_in(easel_home, 3)
    database = easel_home / "easel.db"
    before = file_digest(database)

    with live(kind, easel_home):
        line = assert_one_line_error(app_command(easel_home, "db", "restore"), EXIT_REFUSED)
    after = app_command(easel_home, "db", "restore")

    assert f"is in use by 1 {kind}" in line and "nothing was changed" in line
    assert after.returncode == 0, after.stderr  # once it is gone, the restore goes ahead
    [kept] = set_aside(easel_home)
    assert file_digest(kept) == before  # the live file was not touched while refused


def test_backups_taken_in_the_same_second_are_all_kept(tmp_path: Path) -> None:
    path = tmp_path / "easel.db"
    db = open_database(path)
    taken = [back_up(db, now=1_800_000_000.5) for _ in range(3)]
    db.dispose()

    assert len(set(taken)) == 3
    assert list_backups(path) == taken  # in the order they were taken


def test_restores_in_the_same_second_keep_every_file_they_set_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.models.backups as backups

    path = tmp_path / "easel.db"
    db = open_database(path)
    backup = back_up(db, now=1_800_000_000.5)
    db.dispose()
    monkeypatch.setattr(backups.time, "time", lambda: 1_800_000_000.5)  # one instant, twice

    set_aside = [restore_backup(path, backup)[1] for _ in range(2)]

    assert len(set(set_aside)) == 2 and all(kept.exists() for kept in set_aside)
    assert all(".replaced-" in kept.name for kept in set_aside)
