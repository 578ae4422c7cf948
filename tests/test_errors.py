"""The one error hierarchy: who is a user error, who is transient, and how a bug is shown."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.engine.generation.errors import CheckpointCorrupt, UnsupportedModel
from app.engine.generation.files.sources import ModelNotFound
from app.engine.jobs.params import InvalidParameters
from app.engine.jobs.queue import JobNotFound, JobQueue, NotHoldingJob, RequestRefused
from app.engine.jobs.states import JobEvent, JobStatus, TransitionNotAllowed
from app.errors import (
    BadInput,
    DatabaseCorrupt,
    DatabaseError,
    DatabaseLocked,
    DiskFull,
    EaselError,
    MissingModel,
    UserError,
    describe,
    disk_full,
    is_transient,
    user_message,
)
from app.models.migrations import SchemaTooNew

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (InvalidParameters("the prompt is empty"), BadInput),
        (JobNotFound(3), UserError),
        (RequestRefused("no"), UserError),
        (TransitionNotAllowed(1, JobStatus.PENDING, JobEvent.RESUME), UserError),
        (ModelNotFound("x", []), MissingModel),
        (UnsupportedModel("an SD3 pipeline"), MissingModel),
        (SchemaTooNew("newer"), DatabaseError),
    ],
)
def test_the_errors_a_user_can_act_on_are_user_errors(error: Exception, kind: type) -> None:
    assert isinstance(error, kind) and isinstance(error, UserError)
    assert user_message(error, "/logs/gui.log") == str(error)


def test_the_old_bases_still_hold_for_existing_callers() -> None:
    assert isinstance(InvalidParameters("x"), ValueError)
    assert isinstance(JobNotFound(1), LookupError)
    assert isinstance(ModelNotFound("x", []), LookupError)


@pytest.mark.parametrize(
    "error", [NotHoldingJob(1, "w1", "w2"), CheckpointCorrupt("bad"), KeyError("x"), TypeError()]
)
def test_everything_else_is_a_bug_shown_as_an_internal_error(error: Exception) -> None:
    assert not isinstance(error, UserError)
    message = user_message(error, "/data/logs/gui.log")
    assert message == (
        f"An internal error occurred ({type(error).__name__}); details are in /data/logs/gui.log"
    )


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (DatabaseLocked("locked"), True),
        (disk_full(Path("/")), True),
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (MemoryError("CUDA out of memory"), True),
        (DatabaseCorrupt("damaged"), False),
        (InvalidParameters("bad"), False),
        (ValueError("bad"), False),
        (OSError(errno.EACCES, "Permission denied"), False),
    ],
)
def test_transient_is_a_field_of_the_error(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


def test_an_error_can_say_it_is_transient_for_one_instance() -> None:
    error = EaselError("a hiccup")
    error.transient = True
    assert is_transient(error) and not is_transient(EaselError("another"))


def test_a_failure_is_recorded_with_its_sentence_or_its_type() -> None:
    assert describe(JobNotFound(4)) == "There is no job 4"
    assert describe(ValueError("bad")) == "ValueError: bad"
    assert isinstance(disk_full(Path("/")), DiskFull)


def test_a_bug_in_a_command_is_one_line_and_its_traceback_is_in_the_log(
    easel_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> list[object]:
        raise RuntimeError("a bug in listing")

    monkeypatch.setattr(JobQueue, "jobs", broken)
    assert main(["jobs"]) == 1
    log_file = easel_home / "logs" / "cli.log"
    err = capsys.readouterr().err.strip()
    assert err == f"error: An internal error occurred (RuntimeError); details are in {log_file}"
    log = log_file.read_text()
    assert "Traceback" in log and "RuntimeError: a bug in listing" in log


def test_the_error_module_imports_no_qt_torch_or_database() -> None:
    heavy = ("PySide6", "torch", "sqlalchemy", "sqlite3")
    probe = f"import sys, app.errors; print(sorted(m for m in {heavy} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert result.stdout.strip() == "[]"
