"""Job actions are offered exactly where the transition table allows them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus, allowed_events
from app.ui.presenters.actions import EVENTS, Action, applicable
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import FakeWorkers
from tests.ui.helpers import job_in
from tests.ui.test_item_models import row

# A hang must fail fast, not stall the whole suite (the suite-wide limit is 10 min).
pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("status", list(JobStatus))
def test_actions_follow_the_transition_table(status: JobStatus) -> None:
    job = row(1, status)
    for action, event in EVENTS.items():
        assert bool(applicable(action, [job])) == (event in allowed_events(status)), action
    assert bool(applicable(Action.RERUN, [job])) == status.is_terminal
    assert bool(applicable(Action.UP, [job])) == (status is JobStatus.PENDING)


def test_a_mixed_selection_acts_only_on_the_jobs_that_allow_it() -> None:
    rows = [row(1, JobStatus.PAUSED), row(2, JobStatus.SUCCESS), row(3, JobStatus.PAUSED)]
    assert applicable(Action.RESUME, rows).job_ids == (1, 3)
    assert applicable(Action.RERUN, rows).job_ids == (2,)
    assert not applicable(Action.RETRY, rows)


@pytest.mark.parametrize("status", list(JobStatus))
def test_buttons_follow_the_table_for_a_selected_job(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    queue: JobQueue,
    workers: FakeWorkers,
    status: JobStatus,
) -> None:
    workers.claiming = False
    job_id = job_in(queue, status)
    window = make_window()
    qtbot.waitUntil(lambda: window.vm.jobs.row_of(job_id) is not None)
    window.jobs.select_jobs([job_id])
    allowed = allowed_events(status)
    buttons = window.jobs.buttons
    for action, event in EVENTS.items():
        assert buttons[action].isEnabled() == (event in allowed), action
    assert buttons[Action.RERUN].isEnabled() == status.is_terminal
    assert JobEvent.START not in allowed or status is JobStatus.PENDING
