"""Every worker of a supervisor knows how many share its device (they all run on one), so
each plans for its share of the GPU's memory (`memory.device_workers`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine import paths
from app.engine.generation.memory import DEVICE_WORKERS_ENV
from app.engine.jobs.queue import JobQueue
from app.engine.workers.worker import RunnerLike
from app.testing.scripted_runner import ScriptedRunner
from tests.engine.workers.worker_fixtures import Harness, harness

SEEN = "device-workers-seen"


def noting_runner() -> RunnerLike:
    """A runner factory (module level: it pickles by name) that notes, in the data folder,
    the device's worker count its spawned worker process was given."""
    seen = paths.data_dir() / SEEN
    seen.mkdir(parents=True, exist_ok=True)
    (seen / str(os.getpid())).write_text(os.environ.get(DEVICE_WORKERS_ENV, "unset"))
    return ScriptedRunner()


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path, easel_home: Path) -> Iterator[Harness]:
    with harness(queue, tmp_path / "home") as h:
        yield h


def test_each_of_two_workers_is_told_that_two_share_its_device(
    h: Harness, easel_home: Path
) -> None:
    h.supervisor(workers=2, runner_factory=noting_runner).start()
    seen = easel_home / SEEN
    h.wait_for(lambda: seen.is_dir() and len(list(seen.iterdir())) == 2, what="two workers")
    assert sorted(file.read_text() for file in seen.iterdir()) == ["2", "2"]
    assert DEVICE_WORKERS_ENV not in os.environ  # set in the workers only, never here
