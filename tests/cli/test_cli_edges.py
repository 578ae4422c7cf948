"""Odd input at the command line (issue 21 item 15): one line and exit code 2, never a
traceback, never the default folder behind the user's back, never raw escape codes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.cli import main
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.store.opening import open_queue
from app.models.tables import MAX_JOB_ID
from tests.cli.test_cli_faults import app_command, assert_one_line_error
from tests.cli.test_cli_jobs import run_cli

EXIT_REFUSED = 2


@pytest.mark.parametrize(
    ("home", "expected"),
    [
        ("x" * 300, "too long for the file system: one part has 300 characters"),
        ("a-file", "a-file is a file, not a folder"),
        ("a-file/under/it", "cannot be made: {tmp}/a-file is a file"),
    ],
    ids=["300-character name", "a file", "under a file"],
)
def test_an_unusable_home_is_refused_in_one_line(tmp_path: Path, home: str, expected: str) -> None:
    (tmp_path / "a-file").write_text("not a folder")

    result = app_command(tmp_path / "unused", "--home", str(tmp_path / home), "jobs")

    line = assert_one_line_error(result, EXIT_REFUSED)
    assert expected.format(tmp=tmp_path) in line
    assert (tmp_path / "a-file").read_text() == "not a folder"


def test_an_empty_home_is_refused_not_replaced_by_the_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--home", "", "jobs"])

    assert exited.value.code == EXIT_REFUSED
    assert "--home needs a folder, not an empty name" in capsys.readouterr().err


@pytest.mark.parametrize("job_id", ["99999999999999999999999", str(MAX_JOB_ID + 1), "0", "-3"])
def test_a_job_id_no_job_can_have_is_refused_by_the_parser(
    capsys: pytest.CaptureFixture[str], job_id: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["show", job_id])

    assert exited.value.code == EXIT_REFUSED
    err = capsys.readouterr().err
    assert f"no job has the id {int(job_id)}" in err and "Traceback" not in err


def test_the_largest_job_id_is_looked_up_on_both_stores(
    capsys: pytest.CaptureFixture[str], queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EASEL_DB", queue.db.location)

    code, _, err = run_cli(capsys, "show", str(MAX_JOB_ID))

    assert code == EXIT_REFUSED
    assert f"There is no job {MAX_JOB_ID}" in err


def test_control_characters_in_a_prompt_are_shown_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    prompt = "a red \x1b[31mcircle\x1b[0m\x07 on\nblue \u202eeulb"
    queue = open_queue(Path(os.environ["EASEL_HOME"]) / "easel.db")
    job_id = queue.submit(GenerationParams(prompt, negative_prompt="\x1b]0;owned\x07"))
    queue.db.dispose()

    _, listing, _ = run_cli(capsys, "jobs")
    _, shown, _ = run_cli(capsys, "show", str(job_id))

    for out in (listing, shown):
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert r"a red \x1b[31mcircle\x1b[0m\x07 on\nblue \u202eeulb" in listing
    assert len(listing.splitlines()) == 1
    assert r"\x1b]0;owned\x07" in shown
