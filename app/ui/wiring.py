"""Adapters from the engine to the small interfaces the window needs (`presenters/interfaces.py`).

The only module of `app.ui` that knows the engine's recovery, supervisor and model search.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from app.engine.settings import Settings
from app.ui.presenters.i18n import translate
from app.ui.presenters.interfaces import NoWorkers, RestoreSummary, WorkerPool

if TYPE_CHECKING:
    from app.engine.queue import JobQueue
    from app.engine.recovery import RecoveryReport

log = logging.getLogger(__name__)


def recover_at_launch(queue: JobQueue, settings: Settings) -> RestoreSummary:
    """Settle jobs an earlier run left running; must run before any worker starts."""
    from app.engine.recovery import recover
    from app.engine.retry import RetryPolicy
    from app.engine.worker import default_liveness_dir

    try:
        report = recover(
            queue,
            liveness_dir=default_liveness_dir(),
            heartbeat_timeout_s=settings.heartbeat_timeout_s,
            policy=RetryPolicy(),
        )
    except Exception as error:  # recovery must never keep the window from opening
        log.exception("recovery at launch failed")
        text = translate("Launch", "Could not check the last session's jobs: {error}")
        return RestoreSummary(problems=(text.format(error=error),))
    return summary_of(report)


def summary_of(report: RecoveryReport) -> RestoreSummary:
    return RestoreSummary(
        requeued=tuple(report.requeued), paused=tuple(report.paused),
        cancelled=tuple(report.cancelled), given_up=tuple(report.given_up),
    )  # fmt: skip


def model_names(settings: Settings) -> list[str]:
    """Installed models for the picker (a filesystem scan, run off the GUI thread)."""
    from app.engine.generation.sources import ModelSearchPath, hf_cache_dirs, list_models
    from app.engine.paths import bundled_models_dir

    search = ModelSearchPath(
        bundled=(bundled_models_dir(),), user=(settings.models_path(),), hf_caches=hf_cache_dirs()
    )
    return [model.name for model in list_models(search)]


def make_workers(queue: JobQueue, settings: Settings) -> tuple[WorkerPool, str | None]:
    """The worker supervisor (not started yet), or no workers and a message saying why.

    Importing the supervisor never imports torch: workers are spawned processes.
    """
    try:
        from app.engine.supervisor import Supervisor

        return Supervisor.for_app(queue, settings), None
    except Exception as error:  # a broken install must still show the queue
        log.exception("cannot set up the workers")
        return NoWorkers(), f"Image generation is unavailable: {error}"
