"""Temp files that a killed process left behind, swept at launch.

Every image and checkpoint is written to `.<name>.<random>.tmp` beside its final name and
renamed into place (`generation.files.atomic_write`), so a kill -9 mid-write leaves the
previous file intact and a temp file that nothing will ever rename. Without a sweep those
accumulate in `outputs/` and `checkpoints/` for ever, each as large as an image or a
checkpoint. A write takes well under a second, so a temp file untouched for minutes belongs
to a dead process, even where another live process shares the data folder.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

TEMP_PATTERN = ".*.tmp"  # what atomic_write names its temp files
ABANDONED_AFTER_S = 600.0


def sweep_interrupted_writes(
    folders: Iterable[Path], *, now: float | None = None, min_age_s: float = ABANDONED_AFTER_S
) -> list[Path]:
    """Remove the temp files in `folders` older than `min_age_s`; returns what went."""
    now = time.time() if now is None else now
    removed = []
    for folder in folders:
        for temp in _temp_files(folder):
            try:
                if now - temp.stat().st_mtime < min_age_s:
                    continue  # maybe another live process's write in progress
                temp.unlink()
            except OSError:  # gone meanwhile, or not ours to remove: never stop a launch
                continue
            removed.append(temp)
    if removed:
        log.info("removed %d temp files left by interrupted writes", len(removed))
    return removed


def _temp_files(folder: Path) -> list[Path]:
    try:
        return sorted(path for path in folder.glob(TEMP_PATTERN) if path.is_file())
    except OSError:
        return []
