"""A run that dies leaves a marker (and maybe a faulthandler log) the next launch finds."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from app.engine.crash import SessionGuard


def test_a_clean_run_leaves_nothing_to_report(tmp_path: Path) -> None:
    first = SessionGuard(data_dir=tmp_path)
    assert first.open() is None
    first.close()
    second = SessionGuard(data_dir=tmp_path)
    assert second.open() is None
    second.close()
    assert not list((tmp_path / "logs").glob("*.log"))


def test_a_crash_is_reported_at_the_next_launch_with_its_log(tmp_path: Path) -> None:
    crashing_run = textwrap.dedent(f"""
        import ctypes
        from pathlib import Path
        from app.engine.crash import SessionGuard
        SessionGuard(data_dir=Path({str(tmp_path)!r})).open()
        ctypes.string_at(0)  # a segfault, as a broken native library would cause
    """)
    result = subprocess.run([sys.executable, "-c", crashing_run], capture_output=True)
    assert result.returncode != 0

    guard = SessionGuard(data_dir=tmp_path)
    previous = guard.open()
    assert previous is not None and previous.pid > 0
    assert "Segmentation fault" in previous.crash_text
    assert previous.crash_log is not None and previous.crash_log.exists()
    guard.close()
    assert SessionGuard(data_dir=tmp_path).open() is None


def test_a_killed_run_without_a_traceback_is_still_reported(tmp_path: Path) -> None:
    killed_run = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from app.engine.crash import SessionGuard
        SessionGuard(data_dir=Path({str(tmp_path)!r})).open()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run([sys.executable, "-c", killed_run], capture_output=True)
    previous = SessionGuard(data_dir=tmp_path).open()
    assert previous is not None
    assert previous.crash_log is None and previous.crash_text == ""


def test_two_runs_on_one_folder_keep_their_own_sessions_and_a_kill_is_told(
    tmp_path: Path,
) -> None:
    """Issue 21 item 11: the second window's clean exit used to remove the one marker the
    first had written, so a kill -9 of the first was never reported."""
    first_run = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from app.engine.crash import SessionGuard
        guard = SessionGuard(data_dir=Path({str(tmp_path)!r}))  # held: its lock lives with it
        guard.open()
        print("open", flush=True)
        time.sleep(120)
    """)
    first = subprocess.Popen([sys.executable, "-c", first_run], stdout=subprocess.PIPE, text=True)
    assert first.stdout is not None and first.stdout.readline().strip() == "open"
    try:
        second = SessionGuard(data_dir=tmp_path)
        assert second.open() is None  # the first is alive: not a run that died
        first.kill()
        first.wait(timeout=30)
        second.close()  # a clean exit of the second says nothing of the first
    finally:
        first.kill()

    third = SessionGuard(data_dir=tmp_path)
    previous = third.open()
    assert previous is not None and previous.pid == first.pid
    third.close()
    assert SessionGuard(data_dir=tmp_path).open() is None  # told once


def test_a_marker_of_the_version_before_sessions_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "gui-running.json").write_text('{"pid": 999999999, "started_at": 5.0}')

    previous = SessionGuard(data_dir=tmp_path).open()

    assert previous is not None and previous.started_at == 5.0
    assert not (tmp_path / "gui-running.json").exists()
