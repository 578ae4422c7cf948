"""A headless worker's job goes back to the queue when its supervisor dies (issue 41.4).

The pause-when-gone policy is the window's: a render node's `python -m app worker` killed
with SIGKILL mid-job must not leave its job PAUSED for a person to resume. Its worker saves
the job's progress at the next step and queues it again itself; the next worker (here a
second `worker --until-idle` on the same machine) continues from that step and writes the
image of an uninterrupted run. Real processes throughout: the worker command's supervisor,
its spawned worker, the real runner with the bundled tiny model (each step made slow, so
that the kill comes mid-job)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from app.engine.jobs.params import DEFAULT_MODEL, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.settings import Settings
from app.engine.workers.liveness import WorkerIdentity
from app.models.opening import open_database
from tests.engine.workers.headless import start_machine, stop_machine, wait_until
from tests.engine.workers.headless_main import RUNNER_ENV, SLOW_TINY
from tests.engine.workers.test_worker_e2e import pixels

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

E, S = JobEvent, JobStatus
# A long heartbeat timeout: on a crowded machine a step may take seconds, and this test is
# about the hand-back, not about stalls (its stall floor is half the timeout).
SETTINGS = Settings(workers=1, heartbeat_timeout_s=40.0, cancel_grace_s=5.0)
STEPS = 24  # 3.6 s of slow steps at least: far from done when the kill comes
KILL_AT_STEP = 3
PARAMS = GenerationParams(
    "a red circle", model=DEFAULT_MODEL, steps=STEPS, width=32, height=32, seed=5
)
SLOW = {RUNNER_ENV: SLOW_TINY}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_killed_worker_supervisor_hands_its_job_back_and_the_next_worker_finishes_it(
    tmp_path: Path,
) -> None:
    location = str(tmp_path / "easel.db")
    db = open_database(tmp_path / "easel.db")
    queue = JobQueue(db)
    home = tmp_path / "box"
    try:
        job_id = queue.submit(PARAMS)
        first = start_machine(home, location, SETTINGS, "box", env=SLOW)
        try:
            wait_until(
                lambda: queue.get(job_id).status == S.PROCESSING
                and queue.get(job_id).progress_step >= KILL_AT_STEP,
                timeout_s=180, what="the job to be running",
            )  # fmt: skip
            worker = WorkerIdentity.parse(queue.get(job_id).worker_id)
            assert worker is not None and worker.pid != first.process.pid
            first.process.kill()  # SIGKILL: the supervisor says and settles nothing
            first.process.wait(10)
            wait_until(lambda: gone(worker.pid), 60, "the orphaned worker to exit")
        finally:
            stop_machine(first.process)
        assert "Traceback" not in first.output, first.output

        job = queue.get(job_id)
        timeline = queue.timeline(job_id)
        assert job.status == S.PENDING, [(t.to_status, t.message) for t in timeline]
        assert [(t.event, t.to_status, t.source) for t in timeline[-3:]] == [
            (E.PAUSE, S.PAUSING, "worker"), (E.STOPPED, S.PAUSED, "worker"),
            (E.RESUME, S.PENDING, "worker"),
        ]  # fmt: skip
        gone_words = f"the worker supervisor (pid {first.process.pid}) was gone"
        assert timeline[-3].message == f"handing its job back to the queue: {gone_words}"
        requeued = re.fullmatch(rf"requeued with saved step (\d+): {re.escape(gone_words)}",
                                timeline[-1].message)  # fmt: skip
        assert requeued, timeline[-1].message
        saved_step = int(requeued.group(1))
        assert KILL_AT_STEP <= saved_step < STEPS and job.progress_step == saved_step
        assert job.checkpoint_path and Path(job.checkpoint_path).is_file()

        reference_id = queue.submit(PARAMS)  # the same image, run without a break
        second = start_machine(home, location, SETTINGS, "box", env=SLOW, args=("--until-idle",))
        try:
            assert second.process.wait(300) == 0, second.output
        except subprocess.TimeoutExpired:
            stop_machine(second.process)
            raise
        job, reference = queue.get(job_id), queue.get(reference_id)
        assert (job.status, reference.status) == (S.SUCCESS, S.SUCCESS), second.output
        assert queue.timeline(job_id)[-1].message.startswith(f"resumed from step {saved_step}")
        assert job.attempt == 1  # handed back, not failed: no attempt was spent
        assert pixels(job.output_path) == pixels(reference.output_path)
    finally:
        db.dispose()
