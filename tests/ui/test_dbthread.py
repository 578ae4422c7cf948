"""The database thread's failures: a bug is logged with its traceback, what the user can act
on (a refused password, a locked file) with its sentence only; both reach `failed`."""

from __future__ import annotations

import logging

import pytest

from app.errors import DatabaseError
from app.ui.qt.dbthread import InlineRunner


def fail_with(error: Exception) -> None:
    raise error


def test_a_user_error_is_one_line_in_the_log_and_to_the_user(
    caplog: pytest.LogCaptureFixture,
) -> None:
    said: list[str] = []
    refused = DatabaseError("the password for user easel was refused.")
    InlineRunner().run(lambda: fail_with(refused), lambda _r: None, said.append)
    assert said == [str(refused)]
    (record,) = [r for r in caplog.records if r.name == "app.ui.qt.dbthread"]
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert str(refused) in record.getMessage()


def test_a_bug_keeps_its_traceback_and_the_user_reads_where_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    said: list[str] = []
    InlineRunner().run(lambda: fail_with(KeyError("job")), lambda _r: None, said.append)
    assert said[0].startswith("An internal error occurred (KeyError)")
    (record,) = [r for r in caplog.records if r.name == "app.ui.qt.dbthread"]
    assert record.levelno == logging.ERROR and record.exc_info is not None
