"""What the main window needs from outside, handed in whole (tests pass fakes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.engine.settings import PRUNE_EVERY_S, Settings
from app.ui.presenters.interfaces import (
    ListLoras,
    ListModels,
    RestoreSummary,
    WorkerPool,
    no_loras,
)
from app.ui.presenters.queue_service import QueueService
from app.ui.qt.pruning import Prune


@dataclass
class Dependencies:
    """Everything the window needs from outside, handed in (tests pass fakes)."""

    queue: QueueService
    workers: WorkerPool
    settings: Settings
    save_settings: Callable[[Settings], None]
    list_models: ListModels
    list_loras: ListLoras = no_loras
    restore: RestoreSummary | None = None
    # None: ask with a dialog. Tests answer with a function.
    confirm_quit: Callable[[int], bool] | None = None
    shutdown_timeout_s: float = 15.0
    # One prune by the settings (None: the window never prunes), and how often it runs.
    prune: Prune | None = None
    prune_every_s: float = PRUNE_EVERY_S
