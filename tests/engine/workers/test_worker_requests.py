"""Drain and stop one worker through its row: real worker processes on the bundled model."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.workers.liveness import WorkerIdentity
from app.engine.workers.roster import list_workers, request_workers
from app.engine.workers.supervisor import Supervisor
from app.engine.workers.worker_states import FROM_PANEL, WorkerRequest, WorkerState, WorkerSummary
from tests.engine.conftest import TINY_MODEL
from tests.engine.workers.worker_fixtures import (
    FAST_SETTINGS,
    Harness,
    harness,
    link_model,
    slow_tiny_runner,
    worker_config,
)

S = JobStatus
pytestmark = [pytest.mark.slow, pytest.mark.both_backends]
PARAMS = GenerationParams("a red circle", model=TINY_MODEL, steps=12, width=32, height=32, seed=5)


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path, tiny_model_dir: Path, easel_home: Path) -> Iterator[Harness]:
    link_model(tiny_model_dir, easel_home)
    with harness(queue, tmp_path / "home") as h:
        yield h


def machine(h: Harness, name: str) -> Supervisor:
    config = worker_config(h.queue, h.home, runner_factory=slow_tiny_runner, warm_model=TINY_MODEL)
    config = replace(config, torch_threads=1, name=name, presence_interval_s=0.2)
    supervisor = h.supervisor(config=config)
    supervisor.start()
    return supervisor


def workers(h: Harness) -> dict[str, WorkerSummary]:
    found = list_workers(h.queue, timeout_s=FAST_SETTINGS.heartbeat_timeout_s * 5)
    return {w.machine: w for w in found}


def wait_worker(h: Harness, name: str, state: WorkerState) -> WorkerSummary:
    h.wait_for(
        lambda: name in workers(h) and workers(h)[name].state is state,
        timeout=120, what=f"worker {name} to be {state}",
    )  # fmt: skip
    return workers(h)[name]


def left_for_good(h: Harness, supervisor: Supervisor, name: str) -> None:
    """The worker exited and, polled for a while, its supervisor started none in its place."""
    h.wait_for(lambda: not supervisor.worker_ids(), what=f"{name}'s process to end")
    deadline = time.monotonic() + 2.0
    h.wait_for(lambda: time.monotonic() > deadline)  # the supervisors are polled meanwhile
    assert not supervisor.worker_ids()
    rows = list_workers(h.queue, timeout_s=FAST_SETTINGS.heartbeat_timeout_s)
    assert [w.state for w in rows if w.machine == name] == [WorkerState.EXITED]


def pixels(path: str | None) -> bytes:
    with Image.open(path or "") as image:
        return image.tobytes()


def test_stop_pauses_the_job_which_resumes_on_another_worker_to_the_same_image(
    h: Harness, queue: JobQueue
) -> None:
    a = machine(h, "machine-a")
    reference = h.wait_settled(queue.submit(PARAMS), timeout=120)
    assert reference.status == S.SUCCESS
    assert wait_worker(h, "machine-a", WorkerState.IDLE).jobs_done == 1

    job_id = queue.submit(PARAMS)
    h.wait_progress(job_id, 3)
    assert workers(h)["machine-a"].current_job == job_id
    request_workers(queue, "machine-a", WorkerRequest.STOP, requested_by=FROM_PANEL,
                    timeout_s=FAST_SETTINGS.heartbeat_timeout_s)  # fmt: skip
    paused = h.wait_status(job_id, S.PAUSED)
    pause = next(t for t in queue.timeline(job_id) if t.event == JobEvent.PAUSE)
    assert pause.message == "stop requested from the Workers panel"
    assert paused.progress_step < PARAMS.steps
    wait_worker(h, "machine-a", WorkerState.EXITED)
    left_for_good(h, a, "machine-a")

    machine(h, "machine-b")
    queue.resume(job_id)
    done = h.wait_settled(job_id, timeout=120)
    assert done.status == S.SUCCESS
    identity = WorkerIdentity.parse(done.worker_id)
    assert identity is not None and identity.host == "machine-b"
    assert pixels(done.output_path) == pixels(reference.output_path)
    assert wait_worker(h, "machine-b", WorkerState.IDLE).jobs_done == 1


def test_drain_finishes_the_job_in_hand_then_the_worker_exits(h: Harness, queue: JobQueue) -> None:
    a = machine(h, "machine-a")
    job_id = queue.submit(PARAMS)
    h.wait_progress(job_id, 2)
    request_workers(queue, "machine-a", WorkerRequest.DRAIN, requested_by=FROM_PANEL,
                    timeout_s=FAST_SETTINGS.heartbeat_timeout_s)  # fmt: skip
    wait_worker(h, "machine-a", WorkerState.DRAINING)
    next_job = queue.submit(PARAMS)
    assert h.wait_settled(job_id, timeout=120).status == S.SUCCESS
    gone = wait_worker(h, "machine-a", WorkerState.EXITED)
    assert gone.jobs_done == 1
    left_for_good(h, a, "machine-a")
    assert queue.get(next_job).status == S.PENDING  # drained: it claimed nothing more
