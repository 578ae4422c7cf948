"""Every (status, event) pair against the documented table: allowed, satisfied or refused."""

from __future__ import annotations

import itertools

import pytest

from app.engine.jobs.states import (
    STOPPING_STATUSES,
    JobEvent,
    JobStatus,
    TransitionNotAllowed,
    allowed_events,
    is_already_satisfied,
    next_status,
)

S, E = JobStatus, JobEvent

# docs/architecture.md's table, written out again by hand so a typo in states.py cannot hide.
DESIGN_TABLE = """
PENDING START PROCESSING
PENDING PAUSE PAUSED
PENDING CANCEL CANCELLED
PROCESSING COMPLETE SUCCESS
PROCESSING FAIL FAILED
PROCESSING CANCEL CANCELLING
PROCESSING PAUSE PAUSING
PROCESSING TIMEOUT TIMEOUT
CANCELLING STOPPED CANCELLED
CANCELLING COMPLETE SUCCESS
CANCELLING FAIL FAILED
CANCELLING TIMEOUT CANCELLED
PAUSING STOPPED PAUSED
PAUSING COMPLETE SUCCESS
PAUSING FAIL FAILED
PAUSING CANCEL CANCELLING
PAUSING TIMEOUT PAUSED
PAUSED RESUME PENDING
PAUSED CANCEL CANCELLED
FAILED RETRY PENDING
FAILED CANCEL CANCELLED
TIMEOUT RETRY PENDING
TIMEOUT CANCEL CANCELLED
BLOCKED UNBLOCK PENDING
BLOCKED CANCEL CANCELLED
"""
EXPECTED = {
    (S(src), E(event)): S(dst)
    for src, event, dst in (line.split() for line in DESIGN_TABLE.strip().splitlines())
}
SATISFIED = {
    (S.CANCELLING, E.CANCEL),
    (S.CANCELLED, E.CANCEL),
    (S.PAUSING, E.PAUSE),
    (S.PAUSED, E.PAUSE),
}


@pytest.mark.parametrize(("status", "event"), list(itertools.product(JobStatus, JobEvent)))
def test_every_pair_follows_the_design_table(status: JobStatus, event: JobEvent) -> None:
    if (status, event) in EXPECTED:
        assert next_status(7, status, event) is EXPECTED[(status, event)]
        assert not is_already_satisfied(status, event)
    else:
        with pytest.raises(TransitionNotAllowed) as refused:
            next_status(7, status, event)
        assert str(refused.value) == f"Can't {event.value} job 7 in {status.value}"
        assert is_already_satisfied(status, event) == ((status, event) in SATISFIED)


def test_only_submit_and_submit_after_create_a_job() -> None:
    assert next_status(None, None, E.SUBMIT) is S.PENDING
    assert next_status(None, None, E.SUBMIT_AFTER) is S.BLOCKED
    for event in set(JobEvent) - {E.SUBMIT, E.SUBMIT_AFTER}:
        with pytest.raises(TransitionNotAllowed, match="a new job"):
            next_status(None, None, event)
    for status in JobStatus:
        for event in (E.SUBMIT, E.SUBMIT_AFTER):
            with pytest.raises(TransitionNotAllowed):
                next_status(1, status, event)


def test_terminal_statuses_allow_nothing() -> None:
    for status in (S.SUCCESS, S.CANCELLED):
        assert status.is_terminal
        assert allowed_events(status) == frozenset()


def test_allowed_events_is_what_the_ui_may_offer() -> None:
    assert allowed_events(S.PROCESSING) == {E.COMPLETE, E.FAIL, E.CANCEL, E.PAUSE, E.TIMEOUT}
    assert allowed_events(S.PAUSED) == {E.RESUME, E.CANCEL}
    assert allowed_events(S.FAILED) == {E.RETRY, E.CANCEL}
    assert allowed_events(S.BLOCKED) == {E.UNBLOCK, E.CANCEL}


def test_blocked_is_neither_terminal_nor_running() -> None:
    assert not S.BLOCKED.is_terminal and not S.BLOCKED.is_running


def test_stopping_is_running_with_a_stop_asked_and_nothing_else() -> None:
    # The worker's STOPPED (only_from) and the supervisor's grace kill both read this one set.
    assert {status for status in S if status.is_stopping} == {S.CANCELLING, S.PAUSING}
    assert all(status.is_running for status in STOPPING_STATUSES)
    assert {status for status in S if E.STOPPED in allowed_events(status)} == STOPPING_STATUSES
