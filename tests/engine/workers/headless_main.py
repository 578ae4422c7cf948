"""`python -m app worker`, exactly, but with the scripted runner: a real headless worker
process (its watchdog and retry policy included) for tests that need a worker of its own,
e.g. one under libfaketime, or one whose database server is stopped under it.

    python -m tests.engine.workers.headless_main --name box-1 [other `worker` arguments]

Settings, the database (`EASEL_DB`, `--db`) and the data folder (`EASEL_HOME`, `--home`)
are read as `python -m app worker` reads them. It lives with the tests, not in `app.testing`:
it goes through `app.cli`, whose window command imports Qt, which `app.testing` never may.

Two variables change it for a test: `EASEL_TEST_RUNNER=slow-tiny` runs the real runner (the
bundled tiny model) with slow steps, for a test that compares images; `EASEL_TEST_STARTED_BY`
(`window`, ...) makes its worker behave as if that program had started it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import app.cli.worker as worker_command
from app.cli import main as cli_main
from app.engine.settings import Settings
from app.engine.workers.worker import RunnerFactory, RunnerLike, WorkerConfig, default_runner
from app.engine.workers.worker_states import StartedBy
from app.testing.scripted_runner import ScriptedRunner
from app.testing.step_hooks import SlowStepRunner

RUNNER_ENV = "EASEL_TEST_RUNNER"
STARTED_BY_ENV = "EASEL_TEST_STARTED_BY"
SLOW_TINY = "slow-tiny"
SLOW_STEP_S = 0.15


def slow_tiny_runner() -> RunnerLike:
    """The real runner (it finds the bundled tiny model), each step made slow."""
    return SlowStepRunner(default_runner(), SLOW_STEP_S)


def _runner() -> RunnerLike:
    """Read in the spawned worker, which inherits the environment (a module-level callable
    pickles by name, so the choice is made here rather than in the config)."""
    if os.environ.get(RUNNER_ENV) == SLOW_TINY:
        return slow_tiny_runner()
    return ScriptedRunner()


@dataclass(frozen=True)
class ScriptedWorkerConfig(WorkerConfig):
    """The worker command's configuration, with the scripted runner as its default."""

    runner_factory: RunnerFactory = _runner
    warm_model: str | None = None  # the scripted runner has no model to warm up

    @classmethod
    def from_settings(
        cls, settings: Settings, db_path: Path | str | None = None, **overrides: Any
    ) -> WorkerConfig:
        if started_by := os.environ.get(STARTED_BY_ENV):
            overrides["started_by"] = StartedBy(started_by)
        return super().from_settings(settings, db_path, **overrides)


def main(argv: list[str]) -> int:
    # The command builds its configuration with `WorkerConfig.from_settings` (a classmethod
    # that makes `cls`), so replacing the name it looks up swaps the runner and nothing else.
    worker_command.WorkerConfig = ScriptedWorkerConfig  # type: ignore[misc]
    return cli_main(["worker", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
