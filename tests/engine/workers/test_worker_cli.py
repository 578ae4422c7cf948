"""`python -m app generate | worker | recover`, as a user runs them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.cli import main
from app.cli.worker import _report, _run_until_settled
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.store.opening import open_queue
from tests.engine.conftest import TINY_MODEL
from tests.engine.workers.worker_fixtures import dead_worker, fake_params, harness, link_model

S = JobStatus
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def home_queue(easel_home: Path) -> Iterator[JobQueue]:
    """The queue the CLI itself opens (the database in EASEL_HOME)."""
    queue = open_queue()
    yield queue
    queue.db.dispose()


def tiny(steps: int = 2, size: int = 32) -> GenerationParams:
    return GenerationParams("a red circle", model=TINY_MODEL, steps=steps, width=size, height=size)


def when(condition: Callable[[], bool], action: Callable[[], None]) -> threading.Thread:
    """Run `action` from a thread as soon as `condition` holds (e.g. send a signal mid-job)."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.02)
        action()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_generate_prints_the_image_path_last(
    tiny_model_dir: Path, easel_home: Path, tmp_path: Path
) -> None:
    link_model(tiny_model_dir, easel_home)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "app", "generate", "a red circle", "--model", TINY_MODEL,
         "--steps", "2", "--size", "32x32", "--seed", "3", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    image = Path(result.stdout.strip().splitlines()[-1])
    assert image.parent == out and image.is_file()


def test_generate_ctrl_c_cancels_the_job(queue: JobQueue, tmp_path: Path) -> None:
    job_id = queue.submit(fake_params("step=0.1", steps=100))
    with harness(queue, tmp_path / "home") as h:
        supervisor = h.supervisor(only_job=job_id)
        when(
            lambda: queue.get(job_id).progress_step >= 1,
            lambda: os.kill(os.getpid(), signal.SIGINT),
        )
        job = _run_until_settled(supervisor, queue, job_id)
    assert job.status == S.CANCELLED
    assert queue.timeline(job_id)[-2].message == "Ctrl+C"
    assert _report(job) == 130


def test_generate_failure_is_an_error_and_non_zero(
    queue: JobQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = queue.submit(fake_params())
    queue.claim("w1")
    queue.fire(job_id, JobEvent.FAIL, source="worker", worker_id="w1", changes={"error": "boom"})
    assert _report(queue.get(job_id)) == 1
    out, err = capsys.readouterr()
    assert out == "" and f"error: job {job_id} FAILED: boom" in err


@pytest.mark.slow
def test_worker_until_idle_drains_the_queue_and_exits(
    tiny_model_dir: Path, easel_home: Path, home_queue: JobQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    link_model(tiny_model_dir, easel_home)
    ids = [home_queue.submit(tiny()) for _ in range(2)]
    assert main(["worker", "--until-idle"]) == 0
    assert [home_queue.get(i).status for i in ids] == [S.SUCCESS, S.SUCCESS]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"job {i}" for i in ids]


@pytest.mark.slow
def test_worker_sigterm_pauses_the_running_job_and_exits_cleanly(
    tiny_model_dir: Path, easel_home: Path, home_queue: JobQueue
) -> None:
    link_model(tiny_model_dir, easel_home)
    job_id = home_queue.submit(tiny(steps=100, size=64))
    when(
        lambda: home_queue.get(job_id).progress_step >= 2,
        lambda: os.kill(os.getpid(), signal.SIGTERM),
    )
    assert main(["worker"]) == 0  # no --until-idle: only the signal ends it
    job = home_queue.get(job_id)
    assert job.status == S.PAUSED and 2 <= job.progress_step < 100
    assert job.checkpoint_path and Path(job.checkpoint_path).is_file()
    pause = home_queue.timeline(job_id)[-2]
    assert (pause.event, pause.source, pause.message) == (
        "PAUSE", "worker", "the worker is stopping"
    )  # fmt: skip


def test_recover_prints_what_it_did(
    home_queue: JobQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = home_queue.submit(fake_params())
    home_queue.claim(dead_worker())
    assert main(["recover"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"requeued: #{job_id}"]
    assert main(["recover"]) == 0
    assert capsys.readouterr().out.splitlines() == ["nothing to recover"]
