"""The command line under faults and hostile input (issue 10 items 3, 4, 7, 8, 9, 10; issue 16
item 8; issue 9 item 7): one line, the right exit code, nothing written, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.queue import JobQueue
from app.engine.store import opening
from app.engine.store.opening import OpenFor, open_queue
from app.engine.workers.recovery import WAITING_FOR_THE_LOCK
from app.models.backups import list_backups
from tests.engine.workers.worker_fixtures import dead_worker
from tests.faults import (
    damage,
    file_digest,
    fill_disk,
    read_only_view,
    release,
    small_disk,
    write_lock_held,
)

REPO = Path(__file__).resolve().parents[2]


def app_command(
    home: Path, *argv: str | bytes, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m app ARGV` as a user runs it, on the data folder `home`."""
    env = {**os.environ, "EASEL_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "app", *argv], capture_output=True, text=True, env=env,
        cwd=REPO, input=stdin, timeout=120,
    )  # fmt: skip


def assert_one_line_error(result: subprocess.CompletedProcess[str], exit_code: int) -> str:
    assert result.returncode == exit_code, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    return errors[0]


def jobs_in(home: Path, count: int) -> None:
    queue = open_queue(home / "easel.db")
    queue.submit_many([GenerationParams(f"a lighthouse number {i}") for i in range(count)])
    queue.db.dispose()


def stored_count(home: Path) -> int:
    queue = open_queue(home / "easel.db", OpenFor.READING)
    try:
        return sum(queue.count_by_status().values())
    finally:
        queue.db.dispose()


# --- 10.3: a write lock held by another process --------------------------------------------


def test_reading_commands_work_during_a_lock_and_writes_say_so_in_one_line(
    easel_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs_in(easel_home, 3)
    with write_lock_held(easel_home / "easel.db"):
        listing = app_command(easel_home, "jobs")  # a real process, as the issue ran it
        assert listing.returncode == 0 and listing.stderr == ""
        assert [line.split()[0] for line in listing.stdout.splitlines()] == ["3", "2", "1"]
        assert main(["show", "2"]) == 0
        monkeypatch.setattr(opening, "LOCK_TIMEOUT_S", 0.5)  # not 10 s in a test
        assert main(["submit", "a cat"]) == 1
        assert main(["cancel", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(
        "is locked by another program for more than 0.5 s" in e for e in err
    )
    assert stored_count(easel_home) == 3
    assert main(["show", "1"]) == 0 and " PENDING " in capsys.readouterr().out


def left_running_by_a_dead_worker(home: Path) -> int:
    """A job claimed ten minutes ago by a worker of this host that is gone."""
    queue = open_queue(home / "easel.db")
    stale = JobQueue(queue.db, clock=lambda: time.time() - 600)
    job_id = stale.submit(GenerationParams("a lighthouse", steps=2))
    stale.claim(dead_worker(), job_id=job_id)
    queue.db.dispose()
    return job_id


def released_after(holder: subprocess.Popen[str], seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, release, [holder])
    timer.start()
    return timer


def test_recover_waits_out_a_lock_held_longer_than_the_write_timeout(
    easel_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 21 item 16: launch recovery gave up with "locked" instead of waiting.
    job_id = left_running_by_a_dead_worker(easel_home)
    monkeypatch.setattr(opening, "LOCK_TIMEOUT_S", 0.25)  # each write gives up after 0.25 s
    with write_lock_held(easel_home / "easel.db") as holder:
        released_after(holder, 1.5)  # six times as long
        assert main(["recover"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"requeued: #{job_id}"]
    assert err.splitlines() == [f"note: {WAITING_FOR_THE_LOCK} (Ctrl+C stops waiting)"]
    queue = open_queue(purpose=OpenFor.READING)
    try:
        assert [t.event for t in queue.timeline(job_id)] == ["SUBMIT", "START", "TIMEOUT", "RETRY"]
    finally:
        queue.db.dispose()


@pytest.mark.slow
def test_a_headless_worker_launched_under_a_held_lock_recovers_first(
    easel_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its launch pass was skipped under the lock: the dead worker's job stayed PROCESSING,
    # and with --until-idle the worker found nothing pending and left it so.
    job_id = left_running_by_a_dead_worker(easel_home)
    monkeypatch.setattr(opening, "LOCK_TIMEOUT_S", 0.25)
    with write_lock_held(easel_home / "easel.db") as holder:
        released_after(holder, 1.5)
        assert main(["worker", "--until-idle"]) == 0
    assert capsys.readouterr().out.startswith(f"job {job_id}: ")
    queue = open_queue(purpose=OpenFor.READING)
    try:
        job = queue.get(job_id)
        events = [t.event for t in queue.timeline(job_id)]
    finally:
        queue.db.dispose()
    assert (job.status, job.attempt) == ("SUCCESS", 2)
    assert events == ["SUBMIT", "START", "TIMEOUT", "RETRY", "START", "COMPLETE"]


@pytest.mark.slow
def test_generate_waits_out_a_lock_taken_before_its_launch_recovery(
    easel_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another program takes the write lock between generate's submit and its recovery;
    # the recovery gave up ("locked", exit 1) and the new job stayed queued.
    stranded = left_running_by_a_dead_worker(easel_home)
    monkeypatch.setattr(opening, "LOCK_TIMEOUT_S", 0.25)
    submit = JobQueue.submit
    with ExitStack() as stack:

        def submit_then_lock(queue: JobQueue, *args: Any, **kwargs: Any) -> int:
            job_id = submit(queue, *args, **kwargs)
            released_after(stack.enter_context(write_lock_held(easel_home / "easel.db")), 1.5)
            return job_id

        monkeypatch.setattr(JobQueue, "submit", submit_then_lock)
        assert main(["generate", "a red circle", "--steps", "2"]) == 0
    out, err = capsys.readouterr()
    assert Path(out.strip().splitlines()[-1]).is_file()
    assert f"note: {WAITING_FOR_THE_LOCK} (Ctrl+C stops waiting)" in err.splitlines()
    queue = open_queue(purpose=OpenFor.READING)
    try:
        assert queue.get(stranded).status == "PENDING"  # recovered: requeued, not run
    finally:
        queue.db.dispose()


# --- 10.4: a full disk ---------------------------------------------------------------------


def test_a_full_disk_is_one_line_with_the_free_space(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "3m") as home:
        jobs_in(home, 2)
        filler = fill_disk(home)
        result = app_command(home, "submit", "a cat")
        line = assert_one_line_error(result, 1)
        assert line.startswith(f"error: The disk holding {home} is full (0 MB free)")
        listing = app_command(home, "jobs")  # reading needs no room
        assert listing.returncode == 0 and len(listing.stdout.splitlines()) == 2
        filler.unlink()
        assert stored_count(home) == 2


# --- 10.7: a database damaged in the middle ------------------------------------------------


def test_a_damaged_database_refuses_every_write_and_restores_from_the_backup(
    easel_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each refusal in a real process, as a user meets it; the backup that sets the folder
    # up and the commands after the restore in this one.
    jobs_in(easel_home, 500)
    assert main(["db", "backup"]) == 0
    database = easel_home / "easel.db"
    damage(database, offset=126_000, size=8192)
    before = file_digest(database)
    for argv in (
        ["submit", "a cat"], ["cancel", "3"], ["recover"], ["worker", "--until-idle"],
        ["db", "check"],
    ):  # fmt: skip
        line = assert_one_line_error(app_command(easel_home, *argv), 1)
        assert f"{database} is damaged" in line and "python -m app db restore" in line
    assert file_digest(database) == before  # not one byte written
    [backup] = list_backups(database)
    capsys.readouterr()
    assert main(["db", "restore"]) == 0 and str(backup) in capsys.readouterr().out
    assert main(["db", "check"]) == 0
    assert capsys.readouterr().out.strip().endswith("no damage found")
    assert main(["submit", "a cat"]) == 0 and capsys.readouterr().out.strip() == "501"


# --- 10.8: a read-only data folder ---------------------------------------------------------


def test_a_read_only_data_folder_reads_and_refuses_writes_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    jobs_in(home, 2)
    with read_only_view(home, tmp_path / "ro") as view:
        for argv in (["jobs"], ["show", "1"]):
            result = app_command(view, *argv)
            assert result.returncode == 0 and "Traceback" not in result.stderr
            assert result.stderr.startswith(f"warning: cannot write the log {view}/logs/cli.log")
            assert len(result.stderr.splitlines()) == 1
        assert "a lighthouse number 1" in app_command(view, "jobs").stdout
        line = assert_one_line_error(app_command(view, "submit", "a cat"), 1)
        assert line.startswith(f"error: The data folder {view} is read-only")
    assert stored_count(home) == 2


# --- 10.9: input gaps ----------------------------------------------------------------------


def test_invalid_utf8_in_a_prompt_is_refused_in_one_line(easel_home: Path) -> None:
    jobs_in(easel_home, 1)
    result = app_command(easel_home, "submit", os.fsencode("bad \udcff byte"))
    line = assert_one_line_error(result, 2)
    assert line == "error: the prompt contains bytes that are not valid UTF-8 text"
    assert stored_count(easel_home) == 1


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (GenerationParams("a cat\0"), "the prompt contains a NUL character"),
        (GenerationParams("a cat", negative_prompt="dogs\0"), "the negative prompt contains a NUL"),
        (GenerationParams("a cat", model="easel\0-tiny"), "the model name contains a NUL"),
    ],
)
def test_a_nul_is_refused_through_the_python_api(
    queue: JobQueue, params: GenerationParams, message: str
) -> None:
    with pytest.raises(InvalidParameters, match=message):
        queue.submit(params)
    assert queue.jobs() == []


def garbage_model(home: Path) -> Path:
    folder = home / "models" / "garbage"
    folder.mkdir(parents=True)
    (folder / "model_index.json").write_text("{ this is not json")
    return folder


@pytest.mark.parametrize("model", ["../../etc", "/etc", "/no/such/dir", "garbage", "GARBAGE_DIR"])
@pytest.mark.parametrize("command", ["submit", "generate"])
def test_a_model_that_cannot_load_is_refused_at_submit(
    easel_home: Path, capsys: pytest.CaptureFixture[str], command: str, model: str
) -> None:
    folder = garbage_model(easel_home)
    model = str(folder) if model == "GARBAGE_DIR" else model
    assert main([command, "a cat", "--model", model]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: model {model!r}")
    assert stored_count(easel_home) == 0  # and `generate` left no FAILED job behind


# --- 10.10 and 16.8: scripts and pipes ----------------------------------------------------


def test_jobs_piped_into_head_ends_quietly(easel_home: Path) -> None:
    jobs_in(easel_home, 3000)  # more than a pipe buffer holds
    env = {**os.environ, "EASEL_HOME": str(easel_home)}
    result = subprocess.run(
        f"{sys.executable} -m app jobs --all | head -3", shell=True, capture_output=True,
        text=True, env=env, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert len(result.stdout.splitlines()) == 3
    assert result.stderr == ""


def test_home_is_accepted_before_or_after_the_command(tmp_path: Path) -> None:
    home = tmp_path / "elsewhere"
    env = {k: v for k, v in os.environ.items() if k != "EASEL_HOME"}
    for argv in (["--home", str(home), "submit", "one"], ["submit", "two", "--home", str(home)]):
        subprocess.run([sys.executable, "-m", "app", *argv], env=env, cwd=REPO, check=True,
                       capture_output=True)  # fmt: skip
    assert stored_count(home) == 2
    assert main(["db", "restore", "--list", "--home", str(home)]) == 0  # two levels down too


def test_jobs_says_when_it_shows_part_of_the_list(
    easel_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs_in(easel_home, 5)
    assert main(["jobs", "--limit", "2"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2
    assert err.strip() == "(the newest 2 of 5 jobs; --limit N or --all for more)"
    assert main(["jobs", "--all"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 5 and err == ""


def test_jobs_and_show_speak_json_for_scripts(
    easel_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs_in(easel_home, 2)
    assert main(["cancel", "1"]) == 0
    capsys.readouterr()
    assert main(["jobs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(job["id"], job["status"]) for job in listed] == [(2, "PENDING"), (1, "CANCELLED")]
    assert main(["show", "1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["prompt"] == "a lighthouse number 0"
    assert [t["event"] for t in shown["timeline"]] == ["SUBMIT", "CANCEL"]
