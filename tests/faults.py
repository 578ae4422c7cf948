"""Real faults for the store tests: a lock held by another process, a full disk, a read-only
folder, a damaged file. Each is the real thing where this machine allows it (root: tmpfs,
read-only bind mounts), else the closest SQLite itself produces (said where it happens)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

# A second process that takes the write lock, says so, and holds it until told to stop.
_HOLD_LOCK = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    """
)


@contextmanager
def write_lock_held(db_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holds `BEGIN IMMEDIATE` on `db_path` until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(db_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        release(holder)
        holder.wait(30)


def release(holder: subprocess.Popen[str]) -> None:
    """Let the holder's lock go now (from any thread; again is harmless)."""
    assert holder.stdin is not None
    with suppress(BrokenPipeError, ValueError):  # ValueError: already closed
        holder.stdin.write("\n")
        holder.stdin.close()


def _mount(*args: str) -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@contextmanager
def small_disk(folder: Path, size: str = "2m") -> Iterator[Path]:
    """`folder` on a tmpfs of `size` (root only; the caller skips the test otherwise)."""
    folder.mkdir(parents=True, exist_ok=True)
    if not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)):
        pytest.skip("needs root to mount a small tmpfs (a real full disk)")
    try:
        yield folder
    finally:
        _umount(folder)


def fill_disk(folder: Path) -> Path:
    """Write a filler file until the disk holding `folder` refuses more (ENOSPC)."""
    filler = folder / "filler.bin"
    chunk = b"\0" * 4096
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, chunk)  # unbuffered: ENOSPC surfaces here, not at close
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


@contextmanager
def read_only_view(folder: Path, view: Path) -> Iterator[Path]:
    """`folder` seen through a read-only bind mount at `view` (root only)."""
    view.mkdir(parents=True, exist_ok=True)
    if not _mount("--bind", str(folder), str(view)):
        pytest.skip("needs root to make a read-only bind mount")
    try:
        if not _mount("-o", "remount,bind,ro", str(view)):
            pytest.skip("this kernel refused a read-only remount")
        yield view
    finally:
        _umount(view)


def damage(path: Path, offset: int = 126_000, size: int = 8192) -> None:
    """Overwrite `size` bytes in the middle of the file, as a failing disk would."""
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(os.urandom(size))


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
