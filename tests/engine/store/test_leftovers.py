"""Temp files of writes interrupted by kill -9 are swept at launch (issue 21 item 10)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.engine import paths
from app.engine.store.leftovers import ABANDONED_AFTER_S, sweep_interrupted_writes
from app.engine.store.opening import OpenFor, open_queue

ROOT = Path(__file__).resolve().parents[3]
# A write that never finishes: atomic_write's temp file, half written, then a kill -9.
WRITER = """
import sys, time
from pathlib import Path
from app.durable import atomic_write

def half(handle):
    handle.write(b"half an image")
    handle.flush()
    print("writing", flush=True)
    time.sleep(60)

atomic_write(Path(sys.argv[1]), half)
"""


def killed_mid_write(target: Path) -> Path:
    """Run a real process that dies inside `atomic_write(target)`; its temp file is left."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target)], cwd=ROOT, stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
    )  # fmt: skip
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "writing"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    (temp,) = target.parent.glob(f".{target.name}.*.tmp")
    return temp


def aged(path: Path, seconds: float) -> Path:
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_a_launch_sweeps_what_a_killed_writer_left_and_keeps_the_finished_file() -> None:
    image = paths.outputs_dir() / "000001-7.png"
    image.write_bytes(b"the finished image")
    checkpoint = paths.checkpoints_dir() / "job-1.ckpt"
    left_by_image = aged(killed_mid_write(image), ABANDONED_AFTER_S + 60)
    left_by_checkpoint = aged(killed_mid_write(checkpoint), ABANDONED_AFTER_S + 60)

    queue = open_queue(paths.database_path(), OpenFor.LAUNCH)
    queue.db.dispose()

    assert not left_by_image.exists() and not left_by_checkpoint.exists()
    assert image.read_bytes() == b"the finished image"


def test_a_write_in_progress_and_other_files_are_kept(tmp_path: Path) -> None:
    in_progress = tmp_path / ".000002-1.png.abc123.tmp"
    in_progress.write_bytes(b"being written right now by another live process")
    not_ours = [tmp_path / "notes.tmp", tmp_path / "000002-1.png"]
    for path in not_ours:
        path.write_text("the user's")
        aged(path, ABANDONED_AFTER_S * 10)

    removed = sweep_interrupted_writes([tmp_path, tmp_path / "missing"])

    assert removed == []
    assert in_progress.exists() and all(path.exists() for path in not_ours)


def test_only_a_writer_that_stopped_long_enough_ago_is_taken_for_dead(tmp_path: Path) -> None:
    temp = tmp_path / ".000003-1.png.xyz.tmp"
    temp.write_bytes(b"half")
    now = temp.stat().st_mtime

    assert sweep_interrupted_writes([tmp_path], now=now + ABANDONED_AFTER_S - 1) == []
    assert sweep_interrupted_writes([tmp_path], now=now + ABANDONED_AFTER_S + 1) == [temp]
    assert not temp.exists()
