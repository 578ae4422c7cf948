"""Hung workers, for real: real spawned worker processes, real SIGSTOP/SIGCONT.

Two real worker processes (spawn), real SIGSTOP/SIGCONT: W1 freezes mid-job, the watchdog
times the job out, W2 claims it and is paused (its checkpoint written); then W1 wakes up.
W1 must find it no longer holds the job and stop without touching anything: the new
holder's checkpoint stays, no history row comes from W1, and the job resumes from it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

from app.cli import main
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.settings import Settings, save_settings
from app.engine.store.opening import open_queue
from app.engine.workers.watchdog import time_out_stale_jobs
from app.engine.workers.worker import WorkerConfig, default_liveness_dir, run_worker
from tests.engine.workers.worker_fixtures import WAIT_S, fake_params, worker_config

S = JobStatus
STALE_S = 1.0


def wait_for(condition: object, what: str, timeout: float = WAIT_S) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def processes() -> Iterator[list[BaseProcess]]:
    started: list[BaseProcess] = []
    yield started
    for process in started:
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
        process.join(5)


def start_worker(config: WorkerConfig, processes: list[BaseProcess]) -> BaseProcess:
    process = multiprocessing.get_context("spawn").Process(target=run_worker, args=(config,))
    process.start()
    processes.append(process)
    return process


def test_a_worker_waking_after_a_hang_leaves_the_new_holders_checkpoint_alone(
    queue: JobQueue, tmp_path: Path, processes: list[BaseProcess]
) -> None:
    config = replace(worker_config(queue, tmp_path), until_idle=True)
    job_id = queue.submit(fake_params("step=0.05", steps=100))
    w1 = start_worker(config, processes)
    wait_for(lambda: queue.get(job_id).progress_step >= 3, "W1 to reach step 3")
    assert w1.pid is not None
    os.kill(w1.pid, signal.SIGSTOP)
    w1_id = queue.get(job_id).worker_id

    wait_for(
        lambda: bool(time_out_stale_jobs(queue, STALE_S, now=time.time())),
        "the watchdog to time the job out",
    )
    queue.retry(job_id, source="retry-policy")
    start_worker(config, processes)
    wait_for(lambda: queue.get(job_id).worker_id not in (None, w1_id), "W2 to claim the job")
    wait_for(lambda: queue.get(job_id).progress_step >= 6, "W2 to reach step 6")
    queue.pause(job_id)
    wait_for(lambda: queue.get(job_id).status == S.PAUSED, "W2 to pause")
    paused = queue.get(job_id)
    checkpoint = Path(paused.checkpoint_path or "")
    saved = checkpoint.read_bytes()
    history = len(queue.timeline(job_id))

    os.kill(w1.pid, signal.SIGCONT)
    w1.join(WAIT_S)  # until-idle: W1 exits once it has dropped its run and found no work
    assert w1.exitcode == 0

    assert checkpoint.read_bytes() == saved  # the new holder's progress is untouched
    assert len(queue.timeline(job_id)) == history  # and W1 wrote no history
    assert not any((tmp_path / "outputs").glob("*"))
    assert queue.get(job_id).status == S.PAUSED

    queue.resume(job_id)
    start_worker(config, processes)
    seen: list[int] = []

    def finished() -> bool:
        job = queue.get(job_id)
        seen.append(job.progress_step)
        return job.status == S.SUCCESS

    wait_for(finished, "the resumed job to finish")
    # A claim shows 0 until its first step; a run from scratch would then show 1, 2, ...
    assert min(step for step in seen if step) >= paused.progress_step


def test_headless_recover_kills_a_hung_local_worker_and_settles_its_job(
    easel_home: Path, processes: list[BaseProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 10 item 6: a live lock with a stale heartbeat is a hung worker, not a busy one."""
    save_settings(Settings(heartbeat_timeout_s=2.0))
    queue = open_queue()
    try:
        config = replace(worker_config(queue, easel_home), liveness_dir=str(default_liveness_dir()))
        job_id = queue.submit(fake_params("step=0.2", steps=150))
        worker = start_worker(config, processes)
        wait_for(lambda: queue.get(job_id).progress_step >= 2, "the worker to reach step 2")
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGSTOP)
        wait_for(
            lambda: time.time() - (queue.get(job_id).heartbeat_at or 0.0) > 2.5,
            "the heartbeat to go stale",
        )
        assert main(["recover"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            f"requeued: #{job_id}", f"hung worker stopped: #{job_id}"
        ]  # fmt: skip
        worker.join(WAIT_S)
        assert worker.exitcode == -signal.SIGKILL
        job = queue.get(job_id)
        assert (job.status, job.attempt) == (S.PENDING, 2)
        timeout_row = queue.timeline(job_id)[-2]
        assert (timeout_row.event, timeout_row.source) == ("TIMEOUT", "recovery")
        assert "hung (no heartbeat for" in timeout_row.message
    finally:
        queue.db.dispose()
