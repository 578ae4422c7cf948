"""Issue 21 item 8: two data folders on one shared queue, on one machine.

A real worker process started from data folder A holds a job on the real PostgreSQL test
server; `python -m app --home B recover` must see that the worker is alive (its lock is
machine-wide, not only in A's folder) and leave its job alone.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.liveness import (
    LivenessLock,
    WorkerIdentity,
    is_alive,
    lock_path,
    machine_dir,
    new_token,
    this_host,
)
from app.engine.workers.worker import LIVENESS_FOLDER, run_worker
from app.models.opening import open_database
from tests import pg
from tests.engine.workers.worker_fixtures import WAIT_S, fake_params, worker_config

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def shared_queue() -> Iterator[JobQueue]:
    with pg.fresh_schema() as url:
        database = open_database(url)
        yield JobQueue(database)
        database.dispose()


def test_a_lock_is_seen_from_any_data_folder(tmp_path: Path) -> None:
    token = new_token()
    identity = WorkerIdentity(this_host(), os.getpid(), token)
    folder_a, folder_b = tmp_path / "a" / LIVENESS_FOLDER, tmp_path / "b" / LIVENESS_FOLDER
    with LivenessLock(folder_a, token):
        assert is_alive(identity, folder_a) and is_alive(identity, folder_b)
        assert lock_path(machine_dir(), token).is_file()
    assert not is_alive(identity, folder_a) and not is_alive(identity, folder_b)
    assert not lock_path(machine_dir(), token).exists()  # a clean exit leaves nothing


def test_recover_from_another_data_folder_leaves_a_live_workers_job_alone(
    shared_queue: JobQueue, tmp_path: Path
) -> None:
    home_a, home_b = tmp_path / "A", tmp_path / "B"
    # The worker of data folder A, as `python -m app --home A worker` configures it.
    config = worker_config(shared_queue, home_a)
    assert Path(config.liveness_dir) == home_a / LIVENESS_FOLDER
    job_id = shared_queue.submit(fake_params("step=0.3", steps=150))
    worker = multiprocessing.get_context("spawn").Process(target=run_worker, args=(config,))
    worker.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while shared_queue.get(job_id).progress_step < 2:
            assert time.monotonic() < deadline, "the worker never reached step 2"
            time.sleep(0.05)
        holder = shared_queue.get(job_id).worker_id

        env = {k: v for k, v in os.environ.items() if k not in ("EASEL_HOME", "EASEL_DB")}
        recovered = subprocess.run(
            [sys.executable, "-m", "app", "--home", str(home_b), "--db",
             shared_queue.db.location, "recover"],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=120,
        )  # fmt: skip

        assert recovered.returncode == 0, recovered.stderr
        assert recovered.stdout.splitlines() == [f"still running elsewhere: #{job_id}"]
        job = shared_queue.get(job_id)
        assert (job.status, job.worker_id, job.attempt) == (JobStatus.PROCESSING, holder, 1)
        assert "TIMEOUT" not in [row.event for row in shared_queue.timeline(job_id)]
    finally:
        worker.kill()
        worker.join(10)
