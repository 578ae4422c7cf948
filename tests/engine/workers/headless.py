"""Real headless workers (`python -m app worker` with the scripted runner) on a shared queue,
each as a machine of its own: its own data folder, name and, if asked, a skewed clock."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.settings import DB_ENV, Settings, save_settings
from app.models.tables import JobTransition

REPO = Path(__file__).resolve().parents[3]
STOP_S = 20.0


@dataclass
class Machine:
    name: str
    home: Path
    process: subprocess.Popen[bytes]

    @property
    def output(self) -> str:
        """Everything the worker printed (its log lines are echoed to stderr)."""
        return (self.home / "worker.out").read_text(encoding="utf-8", errors="replace")


def faketime_or_skip() -> str:
    found = shutil.which("faketime")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("libfaketime is missing in CI (apt-get install faketime)", pytrace=False)
        pytest.skip("libfaketime is not installed (apt-get install faketime)")
    return found


@contextmanager
def machines(
    root: Path,
    db_location: str,
    settings: Settings,
    names: dict[str, str | None],
    *,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> Iterator[dict[str, Machine]]:
    """One headless worker per name, with that faketime offset ("+10m"; None: the true
    clock); all stopped (SIGTERM, then SIGKILL) at the end. `env`: more environment (see
    `headless_main`); `args`: more `worker` arguments (`--until-idle`)."""
    started: dict[str, Machine] = {}
    try:
        for name, offset in names.items():
            home = root / name
            started[name] = start_machine(home, db_location, settings, name, offset, env, args)
        yield started
    finally:
        for machine in started.values():
            stop_machine(machine.process)


def start_machine(
    home: Path,
    db_location: str,
    settings: Settings,
    name: str,
    offset: str | None = None,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> Machine:
    """A headless worker with `home` as its data folder (made if need be: a second worker
    may run on the same machine after the first); its output goes to home/worker.out."""
    home.mkdir(parents=True, exist_ok=True)
    save_settings(settings, home / "settings.json")
    env = {
        **os.environ, **(env or {}),
        "EASEL_HOME": str(home), DB_ENV: db_location, "PYTHONPATH": str(REPO),
    }  # fmt: skip
    command = [sys.executable, "-m", "tests.engine.workers.headless_main", "--name", name, *args]
    if offset is not None:
        # The wall clock is off, as on a machine whose clock is wrong. The monotonic clock
        # is shifted by the same constant, which no duration sees: with
        # FAKETIME_DONT_FAKE_MONOTONIC=1, libfaketime 0.9.10 fails the absolute
        # clock_nanosleep that Python 3.11's time.sleep uses (EINVAL on every sleep).
        command = [faketime_or_skip(), "-f", offset, *command]
    with open(home / "worker.out", "wb") as out:
        # A process group of its own: `stop_machine` stops all of it.
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=out, start_new_session=True
        )
    return Machine(name, home, process)


def stop_machine(process: subprocess.Popen[bytes]) -> None:
    """The machine's whole process group: faketime runs the worker as its child, which a
    signal to faketime alone left running after the suite (and its spawned job process)."""
    if process.poll() is None:
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait(STOP_S)
    _signal_group(process, signal.SIGKILL)  # what outlived its leader


def _signal_group(process: subprocess.Popen[bytes], signal_number: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal_number)


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def timed_out_rows(queue: JobQueue, job_ids: list[int]) -> list[JobTransition]:
    return [t for i in job_ids for t in queue.timeline(i) if t.event == "TIMEOUT"]


def all_succeeded(queue: JobQueue, job_ids: list[int]) -> bool:
    return all(queue.get(i).status == JobStatus.SUCCESS for i in job_ids)


def settled_or_given_up(queue: JobQueue, job_ids: list[int]) -> bool:
    """Nothing more will happen by itself (so a failing test fails fast, not by timeout)."""
    from app.engine.jobs.retry import is_settled

    return all(is_settled(queue.get(i)) for i in job_ids)
