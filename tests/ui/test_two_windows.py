"""Two windows on one data folder (issue 21.11): each window's quit question and its pause
at quit concern only the jobs its own workers hold, and the next launch offers exactly the
jobs that were paused.

Each window has what a second Easel process would have: its own connection to the same
SQLite file and its own supervisor with a real worker process. Both share one window.ini,
as two windows of one user do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.engine.jobs.graph import graph_listener
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.supervisor import Supervisor
from app.models.opening import open_database
from app.testing.step_hooks import png_runner
from app.ui.presenters.queue_service import QueueService
from app.ui.widgets.window import MainWindow
from tests.engine.workers.worker_fixtures import FAST_POLICY, FAST_SETTINGS, worker_config
from tests.ui.fakes import FakeWorkers
from tests.ui.test_window import type_and_generate

pytestmark = pytest.mark.timeout(90)

WAIT_MS = 30_000  # spawned workers on a busy machine; a passing test never waits this long
LONG_JOB = GenerationParams("a slow night market step=0.15", steps=150)  # 22 s: outlives the test


@pytest.fixture
def other_queue(db_location: str) -> Iterator[JobQueue]:
    """The second window's queue: its own connection to the same database file."""
    database = open_database(db_location)
    queue = JobQueue(database)
    queue.listeners.append(graph_listener(queue))
    yield queue
    database.dispose()


@pytest.fixture
def supervisors(tmp_path: Path) -> Iterator[Callable[[JobQueue], Supervisor]]:
    made: list[Supervisor] = []

    def make(queue: JobQueue) -> Supervisor:
        config = replace(worker_config(queue, tmp_path), runner_factory=png_runner)
        supervisor = Supervisor(queue, config, FAST_SETTINGS, policy=FAST_POLICY, workers=1,
                                maintenance_interval_s=0.2)  # fmt: skip
        made.append(supervisor)
        return supervisor

    yield make
    for supervisor in made:
        supervisor.shutdown(timeout=5.0)


def run_one_job(qtbot: QtBot, queue: JobQueue, supervisor: Supervisor) -> int:
    """Start `supervisor` and let its worker claim a new long job; the job's id."""
    supervisor.start()
    job_id = queue.submit(LONG_JOB)

    def held_by_it() -> bool:
        job = queue.get(job_id)
        return job.progress_step > 0 and job.worker_id in supervisor.worker_ids()

    qtbot.waitUntil(held_by_it, timeout=WAIT_MS)
    return job_id


def paused_at_quit_text(window: MainWindow) -> str:
    text = window.restore_banner.label.text()
    return text if window.restore_banner.isVisible() and "when Easel closed" in text else ""


def test_closing_a_second_window_asks_about_and_pauses_none_of_the_firsts_jobs(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    queue: JobQueue,
    other_queue: JobQueue,
    supervisors: Callable[[JobQueue], Supervisor],
    workers: FakeWorkers,
    quit_answers: list[int],
) -> None:
    first_workers = supervisors(queue)
    first = make_window(pool=first_workers, shutdown_timeout_s=10.0)
    job_id = run_one_job(qtbot, queue, first_workers)
    second_workers = supervisors(other_queue)
    second = make_window(pool=second_workers, service=QueueService(other_queue))
    second_workers.start()

    second.close()
    assert quit_answers == []  # its own workers held nothing: no question
    job = queue.get(job_id)
    assert job.status == JobStatus.PROCESSING and job.worker_id in first_workers.worker_ids()
    assert JobStatus.PAUSING not in [t.to_status for t in queue.timeline(job_id)]

    first.close()
    assert quit_answers == [1]
    assert queue.get(job_id).status == JobStatus.PAUSED

    workers.claiming = False
    again = make_window()
    assert paused_at_quit_text(again).startswith("1 job paused when Easel closed")
    assert again.restore_offer.paused_at_quit == (job_id,)


def test_each_window_records_the_jobs_it_paused_and_the_next_launch_offers_both(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    queue: JobQueue,
    other_queue: JobQueue,
    supervisors: Callable[[JobQueue], Supervisor],
    workers: FakeWorkers,
    quit_answers: list[int],
) -> None:
    first_workers = supervisors(queue)
    first = make_window(pool=first_workers, shutdown_timeout_s=10.0)
    first_job = run_one_job(qtbot, queue, first_workers)
    # Only now the second window and its worker: started together, either worker could
    # claim the first job (it did, on a busy machine), and the test would wait in vain.
    second_workers = supervisors(other_queue)
    second = make_window(
        pool=second_workers, service=QueueService(other_queue), shutdown_timeout_s=10.0
    )
    second_job = run_one_job(qtbot, other_queue, second_workers)

    first.close()  # pauses its job only, and remembers it
    assert quit_answers == [1]
    assert queue.get(first_job).status == JobStatus.PAUSED
    assert queue.get(second_job).status == JobStatus.PROCESSING
    second.close()  # adds its own job to what the first window remembered
    assert quit_answers == [1, 1]
    assert queue.get(second_job).status == JobStatus.PAUSED

    workers.claiming = False
    again = make_window()
    assert paused_at_quit_text(again).startswith("2 jobs paused when Easel closed")
    assert sorted(again.restore_offer.paused_at_quit) == sorted((first_job, second_job))


def test_a_window_that_paused_nothing_forgets_nothing_another_window_paused(
    qtbot: QtBot, make_window: Callable[..., MainWindow], workers: FakeWorkers
) -> None:
    """Fake pools, no processes: the record itself, whichever window quits last."""
    workers.steps_per_poll = 0
    first = make_window()
    job_id = type_and_generate(qtbot, first, "a night market")
    qtbot.waitUntil(lambda: job_id in workers.steps, timeout=WAIT_MS)
    idle = FakeWorkers(workers.queue, workers.outputs, claiming=False)
    second = make_window(pool=idle)
    first.close()
    second.close()

    workers.claiming = False
    again = make_window()
    assert again.restore_offer.paused_at_quit == (job_id,)
