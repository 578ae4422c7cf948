"""Pruning by itself, as the settings ask: at launch and then every hour, in the window and
in every headless worker, so neither a desktop nor a fleet without a window grows forever.

Nothing happens while the settings keep every job (the default). Images go only when the
settings say so (`prune_images`). Several machines may prune at once (see `retention`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.engine import paths
from app.engine.history.retention import prune, rule_from_settings
from app.engine.jobs.queue import JobQueue
from app.engine.settings import PRUNE_EVERY_S, Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pruned:
    """What one automatic pass removed, and by which settings."""

    removed: int
    freed_bytes: int
    days: int  # the settings' "keep finished jobs for N days" (0: no age limit)
    keep: int  # the settings' "keep at most N" (0: no limit)

    def line(self) -> str:
        """For the log: "Removed 120 finished jobs older than 30 days; freed 12 MB"."""
        limits = [f"older than {_plural(self.days, 'day')}" if self.days else "",
                  f"beyond the newest {self.keep}" if self.keep else ""]  # fmt: skip
        why = " or ".join(filter(None, limits))
        jobs = _plural(self.removed, "finished job")
        return f"Removed {jobs} {why}; freed {megabytes(self.freed_bytes)}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def megabytes(size: int) -> str:
    """12 MB, 0.4 MB: as precise as a status line needs."""
    mb = size / 1e6
    return f"{mb:.0f} MB" if mb >= 10 else f"{mb:.1f} MB"


def prune_by_settings(
    queue: JobQueue,
    settings: Settings,
    *,
    checkpoints_dir: Path | None = None,
    now: float | None = None,
) -> Pruned | None:
    """One pass by the settings' retention; None when they keep every job (or can't write)."""
    rule = rule_from_settings(settings)
    if rule.keeps_everything or queue.db.read_only:
        return None
    report = prune(
        queue, rule, checkpoints_dir=checkpoints_dir or paths.checkpoints_dir(),
        images=settings.prune_images, now=now,
    )  # fmt: skip
    pruned = Pruned(
        len(report.removed), report.freed_bytes,
        settings.keep_finished_days, settings.keep_finished_jobs,
    )  # fmt: skip
    if pruned.removed:
        log.info("automatic prune: %s", pruned.line())
    for line in report.skipped:
        log.debug("automatic prune: %s", line)
    return pruned


class PruneSchedule:
    """When the next automatic pass is due: at once, then every `every_s` after the last."""

    def __init__(
        self, every_s: float = PRUNE_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every_s = every_s
        self._clock = clock
        self._next = clock()

    def due(self) -> bool:
        return self._clock() >= self._next

    def ran(self) -> None:
        self._next = self._clock() + self.every_s
