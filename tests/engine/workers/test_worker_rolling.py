"""Rolling checkpoints end to end (issue 11 item 1): real workers, the real tiny pipeline.

A worker SIGKILLed at step k of n costs at most the steps since its last rolling
checkpoint: the retry resumes there and writes the very image of an uninterrupted run.
A damaged rolling checkpoint is set aside and the retry starts over, with a note.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.messages import MessageKind
from app.engine.workers.supervisor import Supervisor
from app.engine.workers.worker import WorkerConfig
from tests.engine.conftest import TINY_MODEL
from tests.engine.workers.test_checkpoint_faults import overwrite_inside
from tests.engine.workers.test_worker_e2e import pixels
from tests.engine.workers.worker_fixtures import (
    Harness,
    harness,
    link_model,
    slow_tiny_runner,
    statuses,
    worker_config,
)

S = JobStatus
pytestmark = pytest.mark.slow
EVERY = 3  # steps between rolling checkpoints
STEPS = 12
PARAMS = GenerationParams(
    "a red circle", model=TINY_MODEL, steps=STEPS, width=32, height=32, seed=5
)


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path, tiny_model_dir: Path, easel_home: Path) -> Iterator[Harness]:
    link_model(tiny_model_dir, easel_home)
    with harness(queue, tmp_path / "home") as h:
        yield h


def rolling_config(h: Harness) -> WorkerConfig:
    config = worker_config(h.queue, h.home, runner_factory=slow_tiny_runner, warm_model=TINY_MODEL)
    return replace(config, torch_threads=1, checkpoint_interval_s=0, checkpoint_every_steps=EVERY)


def rolling_files(h: Harness, job_id: int) -> list[Path]:
    return sorted((h.home / "checkpoints").glob(f"job-{job_id}-*.ckpt"))


def run_until_a_rolling_checkpoint(h: Harness, supervisor: Supervisor) -> tuple[int, int]:
    """Submit, wait for step 7 and a rolling checkpoint on disk; (job id, worker pid)."""
    job_id = h.queue.submit(PARAMS)
    h.wait_progress(job_id, 7)
    h.wait_for(lambda: bool(rolling_files(h, job_id)), what="a rolling checkpoint")
    [pid] = supervisor.worker_pids()
    return job_id, pid


def test_a_killed_worker_costs_only_the_steps_since_the_last_checkpoint(
    h: Harness, queue: JobQueue
) -> None:
    supervisor = h.supervisor(config=rolling_config(h))
    supervisor.start()
    reference = h.wait_settled(queue.submit(PARAMS), timeout=120)
    assert reference.status == S.SUCCESS and not rolling_files(h, reference.id or 0)

    job_id, pid = run_until_a_rolling_checkpoint(h, supervisor)
    os.kill(pid, signal.SIGKILL)
    job = h.wait_settled(job_id, timeout=120)

    assert job.status == S.SUCCESS
    assert pixels(job.output_path) == pixels(reference.output_path)
    assert statuses(queue, job_id) == [
        "PENDING", "PROCESSING", "TIMEOUT", "PENDING", "PROCESSING", "SUCCESS"
    ]  # fmt: skip
    message = queue.timeline(job_id)[-1].message
    found = re.match(r"resumed from step (\d+) \(saved (\d+) s before the crash\); wrote ", message)
    assert found, message
    resumed_at = int(found.group(1))
    assert resumed_at >= EVERY and resumed_at % EVERY == 0
    retried = [
        m.step for m in h.messages
        if m.job_id == job_id and m.kind is MessageKind.PROGRESS and m.worker_id == job.worker_id
    ]  # fmt: skip
    assert retried[0] == resumed_at + 1  # the retry did not redo steps 1..k
    assert not rolling_files(h, job_id)  # removed once the image was written


def test_a_damaged_rolling_checkpoint_is_set_aside_and_the_retry_starts_over(
    h: Harness, queue: JobQueue
) -> None:
    supervisor = h.supervisor(config=rolling_config(h))
    supervisor.start()
    reference = h.wait_settled(queue.submit(PARAMS), timeout=120)

    job_id, pid = run_until_a_rolling_checkpoint(h, supervisor)
    os.kill(pid, signal.SIGSTOP)  # no more saves while we damage the file
    [saved] = rolling_files(h, job_id)
    overwrite_inside(saved, count=1024)
    os.kill(pid, signal.SIGKILL)
    job = h.wait_settled(job_id, timeout=120)

    assert job.status == S.SUCCESS
    assert pixels(job.output_path) == pixels(reference.output_path)
    message = queue.timeline(job_id)[-1].message
    assert message.startswith("the saved progress was damaged; started over from step 0")
    assert len(list((h.home / "checkpoints").glob(f"job-{job_id}-*.damaged-*"))) == 1
