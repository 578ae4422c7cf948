"""Issue 26.7 in the job list: each queued job says which model it needs and whether a worker
holds it loaded, and its place is the queue's order, not a promise of the run order.

A real SQLite queue; the worker table row is what a live worker writes (`worker.models`)."""

from __future__ import annotations

import json
from collections.abc import Callable

from pytestqt.qtbot import QtBot
from sqlalchemy import insert

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.models.tables import WORKER
from app.ui.itemmodels.delegates import progress_text
from app.ui.itemmodels.job_list_model import DETAIL_ROLE, Col
from app.ui.presenters.rows import JobRow
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import FakeWorkers

TIMEOUT_MS = 5000


def a_worker_holding(queue: JobQueue, worker_id: str, models: list[str]) -> None:
    """The row a live worker keeps: the models it holds, most recently used first."""
    now = queue.clock()
    with queue.db.write() as conn:
        conn.execute(insert(WORKER).values(
            id=worker_id, machine="studio", state="idle", started_at=now, last_seen_at=now,
            models=json.dumps(models),
        ))  # fmt: skip


def queued(window: MainWindow) -> list[JobRow]:
    return [row for row in window.vm.jobs.rows() if row.status is JobStatus.PENDING]


def shown(window: MainWindow, job_id: int) -> tuple[str, str, str]:
    """What the list paints for a row: its second line, its progress text, its tooltip."""
    model = window.vm.jobs
    position = model.row_of(job_id)
    assert position is not None
    row = model.row_at(position)
    detail = model.index(position, Col.PROMPT).data(DETAIL_ROLE)
    tooltip = model.index(position, Col.PROMPT).data(0x0003)  # Qt.ToolTipRole
    return detail, progress_text(row, 0, row.params.steps, None), tooltip


def test_queued_jobs_say_whether_their_model_is_loaded_and_what_a_load_costs(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.claiming = False
    now = [1_000_000.0]
    queue.clock = lambda: now[0]
    # The history: an sd15 job ran 10 s, 4 s of it its model's load (as a worker reports it).
    ran = queue.submit(GenerationParams("an old sketch", model="sd15", steps=10))
    assert queue.claim("studio:1:old") is not None
    now[0] += 10
    queue.fire(ran, JobEvent.COMPLETE, source="worker", worker_id="studio:1:old",
               message="model loaded in 4.0 s")  # fmt: skip
    sketch = queue.submit(GenerationParams("a pencil sketch", model="sd15", steps=10))
    portrait = queue.submit(GenerationParams("a portrait", model="sdxl-base", steps=10))
    a_worker_holding(queue, "studio:2:gpu", ["sdxl-base"])
    window = make_window()
    qtbot.waitUntil(lambda: [r.id for r in queued(window)] == [sketch, portrait],
                    timeout=TIMEOUT_MS)  # fmt: skip

    sketch_line, sketch_place, tooltip = shown(window, sketch)
    portrait_line, portrait_place, _ = shown(window, portrait)
    assert "sd15 · needs loading (~4.0 s) · 64×64" in sketch_line
    assert "sdxl-base · loaded · 64×64" in portrait_line
    # Its ETA counts the load it expects: 6 s of steps learned, plus the 4 s load.
    assert sketch_place == "first in the queue · 10 steps · about 10 s"
    assert portrait_place.startswith("#2 in the queue")
    assert "takes that job first" in tooltip
    # Right not to promise: the worker holding sdxl-base takes the portrait first.
    claimed = queue.claim("studio:2:gpu", models=["sdxl-base"])
    assert claimed is not None and claimed.id == portrait


def test_a_job_for_a_model_never_loaded_yet_needs_loading_with_no_figure(
    qtbot: QtBot, make_window: Callable[..., MainWindow], queue: JobQueue, workers: FakeWorkers
) -> None:
    workers.claiming = False
    job_id = queue.submit(GenerationParams("a first try", model="flux-dev", steps=10))
    window = make_window()
    qtbot.waitUntil(lambda: [r.id for r in queued(window)] == [job_id], timeout=TIMEOUT_MS)
    line, place, _ = shown(window, job_id)
    assert "flux-dev · needs loading · 64×64" in line  # no load timed yet: no guess
    assert place == "first in the queue · 10 steps"
    a_worker_holding(queue, "studio:3:gpu", ["flux-dev"])  # a worker loads it
    window.vm.refresh()
    qtbot.waitUntil(lambda: "flux-dev · loaded" in shown(window, job_id)[0], timeout=TIMEOUT_MS)
