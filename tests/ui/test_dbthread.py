"""The database thread's failures: a bug is logged with its traceback, what the user can act
on (a refused password, a locked file) with its sentence only; both reach `failed`."""

from __future__ import annotations

import logging
from functools import partial

import pytest
from pytestqt.qtbot import QtBot

from app.errors import DatabaseError
from app.ui.qt.dbthread import InlineRunner, ThreadRunner


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


def test_a_held_runner_runs_nothing_until_started_then_all_in_order(qtbot: QtBot) -> None:
    """The window's runner waits for its first paint (app.ui.main): calls queued meanwhile
    run after `start`, in the order they came, recovery first."""
    ran: list[str] = []
    runner = ThreadRunner("held-test", start=False)
    try:
        for name in ("recover", "first page", "models"):
            runner.run(partial(ran.append, name), lambda _r: None)
        qtbot.wait(100)
        assert ran == []
        runner.start()
        runner.start()  # the paint and the fallback timer both call it
        qtbot.waitUntil(lambda: len(ran) == 3, timeout=5000)
        assert ran == ["recover", "first page", "models"]
    finally:
        runner.close()


def test_a_held_runner_closes_without_ever_starting() -> None:
    """A window closed before its first paint: nothing ran, nothing hangs."""
    ran: list[str] = []
    runner = ThreadRunner("held-test", start=False)
    runner.run(lambda: ran.append("recover"), lambda _r: None)
    runner.close(timeout=0.1)
    runner.start()  # the fallback timer firing after the close
    assert ran == []
