"""A database file that is gone is not silently made anew (issue 21 item 4).

`jobs` on a data folder whose easel.db was deleted printed nothing and exited 0, having
made a new, empty database; the next job 1 then took the old job 1's image name. Commands
that read or make requests now say in one line that the database is missing and point at
`db restore`; the first launch of a new data folder still makes it. The command under test
runs in a real process, as a user runs it; the `db backup` that sets a folder up and the
`db restore` after run in this one (what they do is tests/cli/test_cli_db_restore.py's).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.engine.store.opening import OpenFor, open_queue
from tests.cli.test_cli_faults import app_command, assert_one_line_error, jobs_in, stored_count

EXIT_STORE = 1


def a_used_folder_without_its_database(home: Path) -> Path:
    jobs_in(home, 3)
    assert main(["--home", str(home), "db", "backup"]) == 0
    database = home / "easel.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    return database


@pytest.mark.parametrize("argv", [["jobs"], ["show", "1"], ["submit", "a cat"]])
def test_a_deleted_database_is_said_in_one_line_and_not_made_anew(
    easel_home: Path, argv: list[str]
) -> None:
    database = a_used_folder_without_its_database(easel_home)
    line = assert_one_line_error(app_command(easel_home, *argv), EXIT_STORE)
    assert f"There is no job database at {database}, though its backups are in" in line
    assert "`python -m app db restore`" in line
    assert not database.exists()  # nothing was made in its place
    assert main(["db", "restore"]) == 0
    assert stored_count(easel_home) == 3  # and the backup it pointed at brings the jobs back


def test_images_left_in_the_outputs_folder_are_a_sign_of_use_too(easel_home: Path) -> None:
    (easel_home / "outputs").mkdir(parents=True)
    (easel_home / "outputs" / "000001-7.png").write_bytes(b"an image of job 1")
    line = assert_one_line_error(app_command(easel_home, "jobs"), EXIT_STORE)
    assert f"its images are in {easel_home / 'outputs'}" in line
    assert not (easel_home / "easel.db").exists()


def test_the_first_launch_still_makes_the_database(easel_home: Path) -> None:
    listing = app_command(easel_home, "jobs")  # a new data folder: nothing to miss
    assert listing.returncode == 0 and listing.stdout == ""
    assert (easel_home / "easel.db").is_file()


def test_a_launch_starts_a_new_queue_in_a_used_folder_and_logs_it(
    easel_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = a_used_folder_without_its_database(easel_home)
    queue = open_queue(purpose=OpenFor.LAUNCH)  # the window: it can show what it did
    queue.db.dispose()
    assert database.is_file()
    assert f"made a new, empty job database at {database}, though its backups" in caplog.text
