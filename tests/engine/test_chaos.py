"""A small run of benchmarks/chaos.py: kills of workers and of the app lose no job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import pg

REPO = Path(__file__).resolve().parents[2]
# The figures that must be 0: a job lost, run twice, off the table, left waiting, a child
# the graph forgot, a worker left running.
ZERO = ("lost", "double_runs", "illegal_paths", "stuck", "orphaned_children", "leftover_workers")


def run_chaos(*arguments: str) -> dict[str, str]:
    """Its `name: value` lines; fails with everything it printed unless it exited 0."""
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "chaos.py"), "--runner", "fake", *arguments],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)


@pytest.mark.slow
def test_chaos_loses_nothing_runs_nothing_twice_and_leaves_nothing_stuck(tmp_path: Path) -> None:
    figures = run_chaos(
        "--jobs", "30", "--worker-kills", "5", "--supervisor-kills", "2",
        "--interval", "0.25", "--home", str(tmp_path / "chaos"),
    )  # fmt: skip
    assert figures["jobs"] == "30"
    for name in ZERO:
        assert figures[name] == "0", (name, figures)
    assert int(figures["worker_kills"]) >= 5 and int(figures["supervisor_kills"]) >= 2
    assert int(figures["chained_jobs"]) > 0  # a third of the jobs wait for an earlier one


@pytest.mark.slow
def test_chaos_on_postgresql_with_workers_on_separate_machines(tmp_path: Path) -> None:
    # No server restarts here: the test server is shared with the rest of the suite (the
    # benchmark's default run restarts its own private one, see benchmarks/chaos.py).
    figures = run_chaos(
        "--db", pg.server_url(), "--jobs", "16", "--machines", "2", "--worker-kills", "3",
        "--server-restarts", "0", "--interval", "0.25", "--home", str(tmp_path / "chaos"),
    )  # fmt: skip
    assert (figures["jobs"], figures["machines"]) == ("16", "2")
    for name in (*ZERO, "machine_crashes"):
        assert figures[name] == "0", (name, figures)
    assert int(figures["worker_kills"]) >= 3
