"""`python -m app worker`, exactly, but with the scripted runner: a real headless worker
process (its watchdog and retry policy included) for tests that need a worker of its own,
e.g. one under libfaketime, or one whose database server is stopped under it.

    python -m tests.engine.workers.headless_main --name box-1 [other `worker` arguments]

Settings, the database (`EASEL_DB`, `--db`) and the data folder (`EASEL_HOME`, `--home`)
are read as `python -m app worker` reads them. It lives with the tests, not in `app.testing`:
it goes through `app.cli`, whose window command imports Qt, which `app.testing` never may.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import app.cli.worker as worker_command
from app.cli import main as cli_main
from app.engine.workers.worker import RunnerFactory, WorkerConfig
from app.testing.scripted_runner import ScriptedRunner


@dataclass(frozen=True)
class ScriptedWorkerConfig(WorkerConfig):
    """The worker command's configuration, with the scripted runner as its default."""

    runner_factory: RunnerFactory = ScriptedRunner
    warm_model: str | None = None  # the scripted runner has no model to warm up


def main(argv: list[str]) -> int:
    # The command builds its configuration with `WorkerConfig.from_settings` (a classmethod
    # that makes `cls`), so replacing the name it looks up swaps the runner and nothing else.
    worker_command.WorkerConfig = ScriptedWorkerConfig  # type: ignore[misc]
    return cli_main(["worker", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
