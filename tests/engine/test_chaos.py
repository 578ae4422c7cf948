"""A small run of benchmarks/chaos.py: kills of workers and of the app lose no job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_chaos_loses_nothing_runs_nothing_twice_and_leaves_nothing_stuck(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "chaos.py"), "--runner", "fake",
         "--jobs", "30", "--worker-kills", "5", "--supervisor-kills", "2",
         "--interval", "0.25", "--home", str(tmp_path / "chaos")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    figures = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    assert result.returncode == 0, result.stdout + result.stderr
    assert figures["jobs"] == "30"
    for name in ("lost", "double_runs", "illegal_paths", "stuck", "leftover_workers"):
        assert figures[name] == "0", (name, result.stdout)
    assert int(figures["worker_kills"]) >= 5 and int(figures["supervisor_kills"]) >= 2
