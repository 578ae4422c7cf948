"""A worker whose starting process is killed pauses its job at the next step (issue 28.3).

Killing only the window left its workers running unseen: they finished their jobs while the
relaunch said "No jobs needed restoring" and started more workers beside them. Here a real
`python -m app worker` process (its supervisor, with a spawned worker under it, the scripted
runner), its worker told that a window started it, is killed with SIGKILL mid-job. (A
headless worker whose own supervisor is killed hands its job back instead:
test_headless_hand_back.py.)"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.settings import Settings
from app.engine.workers.liveness import WorkerIdentity
from app.engine.workers.recovery import paused_when_window_gone
from app.engine.workers.worker_states import WINDOW_GONE_REASON
from app.models.opening import open_database
from tests.engine.workers.headless import machines, wait_until
from tests.engine.workers.headless_main import STARTED_BY_ENV
from tests.engine.workers.worker_fixtures import fake_params

pytestmark = pytest.mark.timeout(120)

SETTINGS = Settings(workers=1, heartbeat_timeout_s=2.0, cancel_grace_s=1.0)
STEPS = 150  # 37 s at 0.25 s a step: far from done when the kill comes


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_killed_window_leaves_its_job_paused_not_running_unseen(tmp_path: Path) -> None:
    db = open_database(tmp_path / "easel.db")
    queue = JobQueue(db)
    started = time.time()
    as_window = {STARTED_BY_ENV: "window"}
    try:
        with machines(
            tmp_path, str(tmp_path / "easel.db"), SETTINGS, {"box": None}, env=as_window
        ) as running:
            job_id = queue.submit(fake_params("step=0.25", steps=STEPS))
            wait_until(
                lambda: queue.get(job_id).status == JobStatus.PROCESSING
                and queue.get(job_id).progress_step >= 3,
                timeout_s=60, what="the job to be running",
            )  # fmt: skip
            worker = WorkerIdentity.parse(queue.get(job_id).worker_id)
            assert worker is not None and worker.pid != running["box"].process.pid
            running["box"].process.kill()  # SIGKILL: no shutdown, no pause asked by it
            running["box"].process.wait(10)
            wait_until(lambda: queue.get(job_id).status == JobStatus.PAUSED, 30, "the pause")
            wait_until(lambda: gone(worker.pid), 30, "the orphaned worker to exit")
            output = running["box"].output
        job = queue.get(job_id)
        pauses = [t for t in queue.timeline(job_id) if t.event == JobEvent.PAUSE]
        assert [(t.source, t.message) for t in pauses] == [("worker", WINDOW_GONE_REASON)]
        assert 3 <= job.progress_step < STEPS  # stopped at a step, with its progress kept
        assert paused_when_window_gone(queue, since=started) == [job_id]  # the relaunch's news
        assert paused_when_window_gone(queue, since=time.time() + 60) == []
        assert "Traceback" not in output, output
    finally:
        db.dispose()
