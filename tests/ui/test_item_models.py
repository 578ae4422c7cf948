"""The job list and timeline models: Qt's model contract, in-place merges, grouping."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.modeltest import ModelTester
from pytestqt.qtbot import QtBot

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.ui.itemmodels.job_list_model import PROGRESS_ROLE, ROW_ROLE, Col, JobListModel
from app.ui.itemmodels.timeline_model import TECHNICAL_ROLE, TCol, TimelineModel, group_by_attempt
from app.ui.presenters.rows import JobRow, NoteRow, TransitionRow
from app.ui.qt.dbthread import InlineRunner
from app.ui.qt.live import LiveProgress
from app.ui.qt.thumbnails import ThumbnailCache

# A hang must fail fast, not stall the whole suite (the suite-wide limit is 10 min).
pytestmark = pytest.mark.timeout(60)

S, E = JobStatus, JobEvent


def row(job_id: int, status: JobStatus = S.PENDING, **changes: Any) -> JobRow:
    base = JobRow(
        id=job_id, params=GenerationParams(prompt=f"job {job_id}", seed=job_id), status=status,
        attempt=1, max_attempts=3, given_up=False, priority=0, progress_step=0,
        progress_total=20, created_at=time.time(), started_at=None, finished_at=None,
        output_path=None, error=None, rerun_of=None, version=0,
    )  # fmt: skip
    return replace(base, **changes)


@pytest.fixture
def model(qtbot: QtBot) -> JobListModel:
    return JobListModel(LiveProgress(), ThumbnailCache(InlineRunner()))


def ids(model: JobListModel) -> list[int]:
    return [r.id for r in model.rows()]


# Qt's own QAbstractItemModelTester and pytest-qt's Python port check different things.
TESTERS = pytest.mark.parametrize("force_py", [False, True], ids=["qt", "py"])


@TESTERS
def test_job_model_passes_qt_model_tests(
    qtmodeltester: ModelTester, model: JobListModel, force_py: bool
) -> None:
    running = row(3, S.PROCESSING, started_at=time.time() - 5, progress_step=4)
    model.replace_head([running, row(2, S.FAILED, error="boom"), row(1, S.SUCCESS)], True)
    qtmodeltester.check(model, force_py=force_py)


def test_merge_inserts_new_jobs_on_top_and_keeps_the_rest(
    qtbot: QtBot, model: JobListModel
) -> None:
    model.replace_head([row(2), row(1)], complete=True)
    with qtbot.waitSignal(model.rowsInserted):
        model.replace_head([row(4), row(3), row(2), row(1)], complete=True)
    assert ids(model) == [4, 3, 2, 1]


def test_merge_updates_changed_rows_in_place(qtbot: QtBot, model: JobListModel) -> None:
    model.replace_head([row(2), row(1)], complete=True)
    with qtbot.waitSignal(model.dataChanged) as signal:
        model.replace_head([row(2, S.PROCESSING), row(1)], complete=True)
    assert signal.args[0].row() == 0
    assert model.row_at(0).status is S.PROCESSING


def test_merge_removes_jobs_that_left_the_filter(qtbot: QtBot, model: JobListModel) -> None:
    model.replace_head([row(3), row(2), row(1)], complete=True)
    with qtbot.waitSignal(model.rowsRemoved):
        model.replace_head([row(3), row(1)], complete=True)
    assert ids(model) == [3, 1]


def test_a_partial_first_page_keeps_older_loaded_pages(model: JobListModel) -> None:
    model.replace_head([row(i) for i in range(10, 0, -1)], complete=True)
    model.replace_head([row(11), row(10), row(9)], complete=False)
    assert ids(model) == list(range(11, 0, -1))
    assert model.more_available


def test_fetch_more_asks_for_the_page_before_the_last_row(model: JobListModel) -> None:
    asked: list[int] = []
    model._fetch_more = asked.append
    model.replace_head([row(5), row(4)], complete=False)
    model.fetchMore(model.index(0, 0).parent())
    assert asked == [4] and not model.canFetchMore(model.index(0, 0).parent())
    model.append_page([row(3), row(2)], full=False)
    assert ids(model) == [5, 4, 3, 2] and not model.more_available


def test_live_progress_overrides_the_stored_step(model: JobListModel) -> None:
    from app.engine.workers.messages import MessageKind, WorkerMessage

    model.replace_head([row(1, S.PROCESSING, progress_step=2, started_at=time.time())], True)
    model._live.handle(WorkerMessage(MessageKind.PROGRESS, "w", 1, step=10, total=20, elapsed_s=5))
    step, total, eta = model.index(0, Col.PROGRESS).data(PROGRESS_ROLE)
    assert (step, total) == (10, 20) and eta == pytest.approx(5.0, abs=0.5)
    assert model.index(0, Col.PROGRESS).data() == "10/20"
    assert model.index(0, Col.PROMPT).data(ROW_ROLE).id == 1


def transitions() -> list[TransitionRow]:
    t0 = 1_700_000_000.0
    steps = [
        (1, None, S.PENDING, E.SUBMIT, "user", 0.0),
        (1, S.PENDING, S.PROCESSING, E.START, "worker", 0.5),
        (1, S.PROCESSING, S.FAILED, E.FAIL, "worker", 3.0),
        (2, S.FAILED, S.PENDING, E.RETRY, "retry-policy", 5.0),
        (2, S.PENDING, S.PROCESSING, E.START, "worker", 5.2),
        (2, S.PROCESSING, S.SUCCESS, E.COMPLETE, "worker", 9.0),
    ]
    return [
        TransitionRow(i, attempt, a, b, event, source, "", t0 + dt)
        for i, (attempt, a, b, event, source, dt) in enumerate(steps, 1)
    ]


@TESTERS
def test_timeline_model_passes_qt_model_tests(qtmodeltester: ModelTester, force_py: bool) -> None:
    model = TimelineModel()
    model.set_rows(1, transitions())
    qtmodeltester.check(model, force_py=force_py)


def test_timeline_groups_by_attempt_with_durations() -> None:
    model = TimelineModel()
    model.set_rows(7, transitions())
    assert model.rowCount() == 2
    first, second = model.index(0, 0), model.index(1, 0)
    assert first.data() == "Attempt 1" and model.rowCount(first) == 3
    assert model.index(1, TCol.AFTER, second).data() == "+0.2 s"  # START 0.2 s after RETRY
    assert model.index(0, TCol.AFTER, second).data() == "+2.0 s"  # 2 s after attempt 1 ended
    assert model.index(2, TCol.WHAT, first).data() == "Failed"
    assert model.index(0, TCol.WHAT, second).data() == "Trying again automatically"
    tooltip = model.index(2, TCol.WHAT, first).data(Qt.ItemDataRole.ToolTipRole)
    assert tooltip == "Failed"  # the sentence; the stored row is for the Details view
    technical = model.index(2, TCol.WHAT, first).data(TECHNICAL_ROLE)
    assert technical == "PROCESSING → FAILED · FAIL · worker"
    assert model.index(0, TCol.TIME, first).data(TECHNICAL_ROLE) == "new → PENDING · SUBMIT · user"


def test_group_by_attempt_keeps_order() -> None:
    groups = group_by_attempt(transitions())
    assert [g.number for g in groups] == [1, 2]
    assert groups[1].span_s == pytest.approx(4.0)


def test_notes_show_in_their_attempt_in_time_order_and_count_as_no_change(
    qtbot: QtBot, queue: JobQueue
) -> None:
    """A callback's tries, written after the job settled, read from a real store through
    the window's service into its timeline panel: each a muted line, no change of status,
    and the lanes (statuses) untouched."""
    from sqlalchemy import insert

    from app.models.tables import JOB_NOTE
    from app.ui.presenters.queue_service import QueueService
    from app.ui.widgets.timeline_panel import TimelinePanel

    job_id = queue.submit(GenerationParams("a cat"))
    queue.cancel(job_id, source="test")
    at = queue.timeline(job_id)[-1].at
    with queue.db.write() as conn:
        for n, message in enumerate(["callback 1 of 8 to http://h/ failed (HTTP 500); tried "
                                     "again in 1 s", "callback 2 of 8 to http://h/: delivered "
                                     "(HTTP 204), status CANCELLED"]):  # fmt: skip
            values = {"job_id": job_id, "attempt": 1, "source": "callback",
                      "message": message, "at": at + n}  # fmt: skip
            conn.execute(insert(JOB_NOTE), values)
    rows, notes = QueueService(queue).timeline_and_notes(job_id)
    panel = TimelinePanel()
    qtbot.addWidget(panel)
    panel.show_job(job_id, rows, notes)
    model = panel.model
    attempt = model.index(0, 0)
    assert model.rowCount() == 1 and model.rowCount(attempt) == 4
    assert model.index(0, TCol.WHAT).data() == "2 changes"  # notes change no status
    words = [model.index(i, TCol.WHAT, attempt).data() for i in range(4)]
    assert words[2].startswith("Callback 1 of 8 to http://h/ failed (HTTP 500)")
    assert words[3] == "Callback 2 of 8 to http://h/: delivered (HTTP 204), status CANCELLED"
    assert model.index(3, TCol.AFTER, attempt).data() == "+1.0 s"
    technical = model.index(2, TCol.WHAT, attempt).data(TECHNICAL_ROLE)
    assert technical.startswith("note · callback · callback 1 of 8")
    assert [t.event for t in model.transitions()] == [E.SUBMIT, E.CANCEL]
    assert len(panel.lanes._rows) == 2


@TESTERS
def test_timeline_model_with_notes_passes_qt_model_tests(
    qtmodeltester: ModelTester, force_py: bool
) -> None:
    model = TimelineModel()
    note = NoteRow(1, 2, "callback", "callback 1 of 8 to http://h/: delivered", 1_700_000_010.0)
    model.set_rows(1, transitions(), [note])
    qtmodeltester.check(model, force_py=force_py)
    assert [len(a.rows) for a in group_by_attempt(transitions(), [note])] == [3, 4]
