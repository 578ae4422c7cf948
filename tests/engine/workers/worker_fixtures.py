"""Helpers for tests with real worker processes: fast settings, a supervisor, waiting.

Workers run the scripted runner (`app.testing.scripted_runner`, no torch) unless a test asks
for the real one; the real tiny pipeline is linked into the test's models folder.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy, is_settled
from app.engine.jobs.states import JobStatus
from app.engine.settings import Settings
from app.engine.workers.liveness import WorkerIdentity, new_token, this_host
from app.engine.workers.messages import WorkerMessage
from app.engine.workers.supervisor import Supervisor
from app.engine.workers.worker import (
    RunnerFactory,
    RunnerLike,
    WorkerConfig,
    database_file,
    default_runner,
)
from app.models.tables import Job
from app.testing.scripted_runner import ScriptedRunner
from app.testing.step_hooks import SlowStepRunner

FAST_SETTINGS = Settings(workers=1, max_attempts=3, heartbeat_timeout_s=2.0, cancel_grace_s=1.0)
FAST_POLICY = RetryPolicy(base_delay_s=0.1, max_delay_s=0.5)
WAIT_S = 30.0  # generous: the machine may be busy; a passing test never waits this long


def dead_worker() -> str:
    """The id of a worker that is gone: this host, a pid that exists (ours), no lock held."""
    return str(WorkerIdentity(this_host(), os.getpid(), new_token()))


def fake_params(script: str = "", *, steps: int = 5, seed: int = 7) -> GenerationParams:
    return GenerationParams(f"a cat {script}".strip(), steps=steps, seed=seed, model="fake")


def worker_config(
    queue: JobQueue,
    home: Path,
    *,
    runner_factory: RunnerFactory = ScriptedRunner,
    warm_model: str | None = None,
) -> WorkerConfig:
    return WorkerConfig(
        db_path=str(database_file(queue)),
        outputs_dir=str(home / "outputs"),
        checkpoints_dir=str(home / "checkpoints"),
        liveness_dir=str(home / "workers"),
        heartbeat_interval_s=0.25,
        progress_interval_s=0.0,
        idle_poll_s=0.05,
        warm_model=warm_model,
        runner_factory=runner_factory,
    )


@dataclass
class Harness:
    """A supervisor on the test's queue, polled by `wait_for`, always shut down at the end."""

    queue: JobQueue
    home: Path
    supervisors: list[Supervisor] = field(default_factory=list)
    messages: list[WorkerMessage] = field(default_factory=list)

    def supervisor(
        self,
        *,
        workers: int = 1,
        settings: Settings = FAST_SETTINGS,
        config: WorkerConfig | None = None,
        **config_changes: Any,
    ) -> Supervisor:
        config = replace(config or worker_config(self.queue, self.home), **config_changes)
        supervisor = Supervisor(
            self.queue, config, settings, policy=FAST_POLICY, workers=workers,
            maintenance_interval_s=0.1,
        )  # fmt: skip
        self.supervisors.append(supervisor)
        return supervisor

    def wait_for(
        self, condition: Callable[[], bool], *, timeout: float = WAIT_S, what: str = ""
    ) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            for supervisor in self.supervisors:
                self.messages.extend(supervisor.poll())
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or condition}")
            time.sleep(0.02)

    def wait_status(self, job_id: int, *statuses: JobStatus, timeout: float = WAIT_S) -> Job:
        self.wait_for(
            lambda: self.queue.get(job_id).status in statuses,
            timeout=timeout, what=f"job {job_id} to be {'/'.join(statuses)}",
        )  # fmt: skip
        return self.queue.get(job_id)

    def wait_settled(self, job_id: int, timeout: float = WAIT_S) -> Job:
        """Until the job is finished, cancelled, paused, or failed and given up."""

        def settled() -> bool:
            job = self.queue.get(job_id)
            return is_settled(job) or job.status == JobStatus.PAUSED

        self.wait_for(settled, timeout=timeout, what=f"job {job_id} to settle")
        return self.queue.get(job_id)

    def wait_progress(self, job_id: int, step: int) -> Job:
        self.wait_for(
            lambda: self.queue.get(job_id).progress_step >= step,
            what=f"job {job_id} to reach step {step}",
        )
        return self.queue.get(job_id)

    def close(self) -> None:
        for supervisor in self.supervisors:
            supervisor.shutdown(timeout=5.0)


@contextmanager
def harness(queue: JobQueue, home: Path) -> Iterator[Harness]:
    h = Harness(queue, home)
    try:
        yield h
    finally:
        h.close()


def events(queue: JobQueue, job_id: int) -> list[str]:
    return [t.event for t in queue.timeline(job_id)]


def statuses(queue: JobQueue, job_id: int) -> list[str]:
    return [t.to_status for t in queue.timeline(job_id)]


# --- the real runner -------------------------------------------------------------------------

STEP_DELAY_S = 0.15


def slow_tiny_runner() -> RunnerLike:
    """A runner factory for spawned workers (module level, so it pickles by name)."""
    return SlowStepRunner(default_runner(), STEP_DELAY_S)


def link_model(model_dir: Path, home: Path) -> None:
    """Make `model_dir` one of the user's models in the data folder `home`."""
    models = home / "models"
    models.mkdir(parents=True, exist_ok=True)
    (models / model_dir.name).symlink_to(model_dir, target_is_directory=True)


def broken_runner() -> RunnerLike:
    """A runner factory that fails like a broken install (the worker dies while starting)."""
    raise ImportError("scripted: torch is not installed")
