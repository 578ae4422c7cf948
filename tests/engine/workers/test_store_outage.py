"""A database outage burns no attempts (issue 21, item 3).

A PostgreSQL server of the test's own (the shared test server must stay up for the other
tests) is stopped for more than twice the heartbeat timeout while two real headless
workers each run a job, each worker with its own watchdog. Before, both jobs were timed
out on reconnect and restarted, and each worker logged a traceback per heartbeat and a line
per listen. Now the workers keep their jobs, no watchdog judges heartbeats nobody could
write, and each worker says once that the server went away and once that it is back."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from app.engine.generation.outcome import GenerationOutcome
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.settings import Settings
from app.engine.workers.watchdog import time_out_stale_jobs
from app.engine.workers.worker import Outbox, Worker
from app.errors import DatabaseUnreachable
from app.models.db import Outage
from app.models.opening import open_database
from app.testing.scripted_runner import ScriptedRunner
from tests.engine.workers.headless import (
    REPO,
    all_succeeded,
    machines,
    settled_or_given_up,
    timed_out_rows,
    wait_until,
)
from tests.engine.workers.worker_fixtures import fake_params, worker_config

SERVER_SCRIPT = REPO / "scripts" / "pg_test_server.sh"
SETTINGS = Settings(heartbeat_timeout_s=3.0, max_attempts=3)
OUTAGE_S = 8.0  # well over the heartbeat timeout: every heartbeat goes stale meanwhile
# Words of lines about the outage: what the database says once, and what used to repeat.
OUTAGE_WORDS = ("Lost the job database", "reachable again", "listening", "heartbeat failed")


@dataclass
class PrivateServer:
    url: str
    env: dict[str, str]

    def stop(self) -> None:
        subprocess.run([str(SERVER_SCRIPT), "stop"], env=self.env, check=True, timeout=60)

    def start(self) -> None:
        subprocess.run(
            [str(SERVER_SCRIPT), "start"], env=self.env, check=True, timeout=120,
            capture_output=True,
        )  # fmt: skip


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def private_server() -> Iterator[PrivateServer]:
    """A PostgreSQL cluster of this test's own, started by the suite's own script."""
    root = Path(tempfile.mkdtemp(prefix="easel-pg-outage-"))  # in /tmp: the server's user
    env = {**os.environ, "EASEL_PG_DIR": str(root), "EASEL_PG_PORT": str(_free_port())}
    try:
        started = subprocess.run(
            [str(SERVER_SCRIPT), "start"], env=env, capture_output=True, text=True,
            timeout=120, check=True,
        )  # fmt: skip
        url = started.stdout.strip()
        if not url:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail("no PostgreSQL is installed in CI", pytrace=False)
            pytest.skip("no PostgreSQL is installed (scripts/pg_test_server.sh found none)")
        yield PrivateServer(url, env)
    finally:
        subprocess.run([str(SERVER_SCRIPT), "stop"], env=env, timeout=60, check=False)
        shutil.rmtree(root, ignore_errors=True)


def test_a_server_outage_burns_no_attempt_and_is_said_once(
    private_server: PrivateServer, tmp_path: Path
) -> None:
    db = open_database(private_server.url)
    queue = JobQueue(db)
    names: dict[str, str | None] = {"box-1": None, "box-2": None}
    try:
        with machines(tmp_path, db.location, SETTINGS, names) as running:
            ids = [queue.submit(fake_params("step=0.25", steps=48, seed=i)) for i in range(2)]
            wait_until(
                lambda: all(_running_a_while(queue, i) for i in ids),
                timeout_s=60, what="both jobs to be running",
            )  # fmt: skip
            private_server.stop()
            time.sleep(OUTAGE_S)
            private_server.start()
            wait_until(
                lambda: all_succeeded(queue, ids) or settled_or_given_up(queue, ids),
                timeout_s=90, what="both jobs to finish",
            )  # fmt: skip
            timed_out = timed_out_rows(queue, ids)
            jobs = [queue.get(i) for i in ids]
        outputs = {name: machine.output for name, machine in running.items()}
    finally:
        db.dispose()
    assert timed_out == [], [f"#{t.job_id}: {t.message}" for t in timed_out]
    assert [(job.status, job.attempt) for job in jobs] == [(JobStatus.SUCCESS, 1)] * 2
    for name, output in outputs.items():
        assert "Traceback" not in output, f"{name} printed a traceback:\n{output}"
        about_it = [line for line in output.splitlines() if any(w in line for w in OUTAGE_WORDS)]
        assert 2 <= len(about_it) <= 4, f"{name} said of the outage:\n" + "\n".join(about_it)
        assert any("reachable again" in line for line in about_it), output


def _running_a_while(queue: JobQueue, job_id: int) -> bool:
    job = queue.get(job_id)
    return job.status == JobStatus.PROCESSING and job.progress_step >= 2


def test_after_an_outage_the_watchdog_counts_from_when_the_store_came_back(
    tmp_path: Path,
) -> None:
    db = open_database(tmp_path / "easel.db")
    try:
        beat_at = 1_000.0
        job_id = JobQueue(db).submit(fake_params())
        JobQueue(db, clock=lambda: beat_at).claim("box-1")  # its last heartbeat
        now = beat_at + 60.0  # the store was away for a minute: nobody could beat
        db.outage.began(DatabaseUnreachable("Lost the job database: stopped."))
        db.outage.ended()
        queue = JobQueue(db, clock=lambda: now)
        assert time_out_stale_jobs(queue, 3.0, now=now) == []
        assert queue.get(job_id).status == JobStatus.PROCESSING
        assert db.outage.ended_at is not None
        db.outage.ended_at -= 3.5  # back for longer than the timeout, and still no beat
        [timed_out] = time_out_stale_jobs(queue, 3.0, now=now)
        assert timed_out.record.job_id == job_id
    finally:
        db.dispose()


def test_an_outage_is_said_once_when_it_begins_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outage = Outage()
    with caplog.at_level(logging.INFO, logger="app.models.db"):
        for _ in range(20):  # every heartbeat, listen and poll of a long outage
            outage.began(DatabaseUnreachable("Lost the job database: stopped."))
        for _ in range(3):
            outage.ended()
    said = [(record.levelname, record.getMessage()) for record in caplog.records]
    assert [level for level, _ in said] == ["WARNING", "INFO"], said
    assert said[0][1].startswith("Lost the job database") and "reachable again" in said[1][1]


class AwayAtFirst(ScriptedRunner):
    """The store goes away as the first run starts (its init image, its saved progress)."""

    runs = 0

    def run(self, params: GenerationParams, *args: Any, **kwargs: Any) -> GenerationOutcome:
        AwayAtFirst.runs += 1
        if AwayAtFirst.runs == 1:
            raise DatabaseUnreachable("Lost the job database: stopped.")
        return super().run(params, *args, **kwargs)


def test_a_run_broken_off_by_an_outage_runs_again_on_the_same_claim(tmp_path: Path) -> None:
    db = open_database(tmp_path / "easel.db")
    queue = JobQueue(db)
    stop = threading.Event()
    config = replace(worker_config(queue, tmp_path), heartbeat_interval_s=0.05)
    worker = Worker(config, queue, AwayAtFirst(), "w1", Outbox(None), stop_event=stop)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        job_id = queue.submit(fake_params(steps=2))
        wait_until(lambda: queue.get(job_id).status == JobStatus.SUCCESS, 30, "the job to finish")
    finally:
        stop.set()
        thread.join(30)
        db.dispose()
    assert AwayAtFirst.runs == 2
    events = [t.event for t in queue.timeline(job_id)]
    assert events == ["SUBMIT", "START", "COMPLETE"]  # one claim, no FAIL, attempt 1
