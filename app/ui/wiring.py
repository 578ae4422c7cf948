"""Adapters from the engine to the small interfaces the window needs (`presenters/interfaces.py`).

The only module of `app.ui` that knows the engine's recovery, supervisor and model search.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.engine.settings import Settings
from app.ui.presenters.i18n import translate
from app.ui.presenters.interfaces import LaunchWait, NoWorkers, RestoreSummary, WorkerPool
from app.ui.presenters.model_choices import FewStepModel, LoraChoice, ModelChoice

if TYPE_CHECKING:
    from app.engine.generation.files.registry import Architecture, VideoRequests
    from app.engine.generation.files.sources import ModelInfo
    from app.engine.history.auto_prune import Pruned
    from app.engine.jobs.queue import JobQueue
    from app.engine.workers.recovery import RecoveryReport

log = logging.getLogger(__name__)


def recover_at_launch(
    queue: JobQueue,
    settings: Settings,
    *,
    wait_for_lock: bool = False,
    killed_since: float | None = None,
) -> RestoreSummary | LaunchWait | None:
    """Settle jobs an earlier run left running; must run before any worker starts (on the
    database thread: it may wait).

    `killed_since`: when the last run began, if it did not close cleanly: jobs its workers
    paused by themselves once it was gone are told too. None when another program holds
    the write lock, a `LaunchWait` for another store error that passes (a full disk, the
    shared queue's server away): recovery left nothing half done (each job is settled in
    a transaction of its own), and the window says so before it calls again with
    `wait_for_lock`, which waits as the command line's `recover` does: the lock out
    (`recover_when_unlocked`), and any such error, trying again every `LOCK_RETRY_S`
    until it passes. Only an error that does not pass is told as a problem."""
    from app.engine.workers.recovery import LOCK_RETRY_S
    from app.errors import DatabaseLocked, EaselError

    while True:
        try:
            return _recover_and_tell(queue, settings, wait_for_lock, killed_since)
        except EaselError as error:
            if not error.transient:
                return _could_not_check(error)
            if wait_for_lock:
                log.info("launch recovery waits: %s", error)
                time.sleep(LOCK_RETRY_S)
                continue
            log.warning("launch recovery waits until this passes: %s", error)
            if isinstance(error, DatabaseLocked):
                return None
            text = translate(
                "Launch",
                "Easel cannot write its job store for now ({error}). It settles the last "
                "session's jobs and starts its workers as soon as it can.",
            )
            return LaunchWait(text.format(error=error))
        except Exception as error:  # recovery must never keep the window from opening
            return _could_not_check(error)


def _recover_and_tell(
    queue: JobQueue, settings: Settings, wait_for_lock: bool, killed_since: float | None
) -> RestoreSummary:
    from app.engine.jobs.retry import RetryPolicy
    from app.engine.workers.recovery import (
        paused_when_window_gone,
        recover,
        recover_when_unlocked,
    )
    from app.engine.workers.worker import default_liveness_dir

    recovering = recover_when_unlocked if wait_for_lock else recover
    report = recovering(
        queue,
        liveness_dir=default_liveness_dir(),
        heartbeat_timeout_s=settings.heartbeat_timeout_s,
        policy=RetryPolicy(),
    )
    if killed_since is None:  # a clean last run: running jobs are another window's, not news
        return summary_of(report)
    gone = paused_when_window_gone(queue, killed_since)
    return summary_of(report, gone, still_running=tuple(report.still_running))


def _could_not_check(error: Exception) -> RestoreSummary:
    log.error("recovery at launch failed", exc_info=error)
    text = translate("Launch", "Could not check the last session's jobs: {error}")
    return RestoreSummary(problems=(text.format(error=error),))


def summary_of(
    report: RecoveryReport,
    window_gone: Sequence[int] = (),
    still_running: tuple[int, ...] = (),
) -> RestoreSummary:
    paused = tuple(dict.fromkeys((*report.paused, *window_gone)))
    return RestoreSummary(
        requeued=tuple(report.requeued), paused=paused,
        cancelled=tuple(report.cancelled), given_up=tuple(report.given_up),
        window_gone=tuple(i for i in window_gone if i not in report.paused),
        still_running=still_running,
    )  # fmt: skip


def prune_by_settings(queue: JobQueue, settings: Settings) -> str:
    """One automatic prune by the settings (off the GUI thread); what to tell, "" if nothing
    went. The log has its own line (`auto_prune`)."""
    from app.engine.history.auto_prune import prune_by_settings as prune

    pruned = prune(queue, settings)
    return prune_note(pruned) if pruned is not None and pruned.removed else ""


def prune_note(pruned: Pruned) -> str:
    """ "Removed 120 finished jobs older than 30 days; freed 12 MB" in the window's language."""
    from app.engine.history.auto_prune import megabytes

    if pruned.removed == 1:
        jobs = translate("Prune", "1 finished job")
    else:
        jobs = translate("Prune", "{n} finished jobs").format(n=pruned.removed)
    if pruned.days == 1:
        older = translate("Prune", "older than a day")
    else:
        older = translate("Prune", "older than {days} days").format(days=pruned.days)
    beyond = translate("Prune", "beyond the newest {keep}").format(keep=pruned.keep)
    if pruned.days and pruned.keep:
        why = translate("Prune", "{older} or {beyond}").format(older=older, beyond=beyond)
    else:
        why = older if pruned.days else beyond
    return translate("Prune", "Removed {jobs} {why}; freed {size}").format(
        jobs=jobs, why=why, size=megabytes(pruned.freed_bytes)
    )


def model_choices(settings: Settings) -> list[ModelChoice]:
    """Installed models for the picker (a filesystem scan, run off the GUI thread)."""
    from app.engine.generation.families.flow_params import (
        edits_images,
        guidance_is_distilled,
        samplers_for,
        takes_negative_prompt,
    )
    from app.engine.generation.families.video_params import video_families
    from app.engine.generation.files.architecture import MAX_SIDE_PER_NATIVE
    from app.engine.generation.files.sources import disk_bytes, list_models

    videos = video_families()
    return [
        ModelChoice(
            name=model.name,
            kind=_kind(model) if model.supported else "",
            architecture=str(model.architecture or ""),
            native_size=model.native_size,
            presets=model.size_presets or ModelChoice(model.name).presets,
            unsupported_reason=model.unsupported_reason
            or ("" if model.supported else translate("ModelChoice", "unknown model type")),
            max_side=MAX_SIDE_PER_NATIVE * model.native_size,
            samplers=samplers_for(model.architecture),
            takes_negative_prompt=takes_negative_prompt(model.architecture, _distilled(model)),
            distilled_guidance=guidance_is_distilled(model.architecture),
            disk_bytes=sum(disk_bytes(path) for path in model.files),
            quantisation=model.quantisation,
            edits=edits_images(model.architecture),
            few_step=_few_step(model),
            **_edit_fields(model.architecture),
            **_video_fields(videos.get(model.architecture) if model.architecture else None),
        )
        for model in list_models(settings.model_search_path())
    ]


def _edit_fields(architecture: Architecture | None) -> dict[str, Any]:
    """How many input images an edit on the model reads and its own steps and cfg."""
    from app.engine.generation.families.flow_params import edit_defaults

    steps, cfg = edit_defaults(architecture)
    images = architecture.spec.requests.edit_images if architecture is not None else 1
    return {"edit_images": images, "edit_steps": steps, "edit_cfg": cfg}


def _video_fields(video: VideoRequests | None) -> dict[str, Any]:
    """A video model's frame rules for the form (none for an image model)."""
    if video is None:
        return {}
    return {"frame_step": video.frame_step, "default_frames": video.default_frames,
            "default_fps": video.default_fps,
            "takes_last_image": video.takes_last_image,
            "weighs_images": video.weighs_images}  # fmt: skip


def _few_step(model: ModelInfo) -> FewStepModel | None:
    """A few-step model's own settings (a distilled LTX-Video's, told by its name)."""
    from app.engine.generation.prompts.few_step import recognise_model

    found = recognise_model(model)
    if found is None:
        return None
    schedule = found.settings()["scheduler_config"]
    return FewStepModel(found.row.label, found.steps, found.row.cfg, found.row.sampler, schedule)


def _distilled(model: ModelInfo) -> bool:
    """A step-distilled folder (its model index says so; Flux.2 Klein): it runs without CFG."""
    from app.engine.generation.files.architecture import is_step_distilled

    return is_step_distilled(model.architecture, model.path)


def _kind(model: ModelInfo) -> str:
    """The architecture part of `ModelInfo.label` ("SDXL, 1024 px" -> "SDXL")."""
    return model.kind


def lora_choices(settings: Settings) -> list[LoraChoice]:
    """LoRA files in the models folder's lora/ subfolder, by name, each with its size and
    the preview picture beside it (off the GUI thread)."""
    from app.engine.generation.prompts.loras import available_loras, lora_folders, lora_preview

    found = available_loras(lora_folders(settings.model_search_path()))
    return [
        LoraChoice(name, str(lora_preview(path) or ""), _size(path))
        for name, path in sorted(found.items(), key=lambda item: item[0].lower())
    ]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def make_workers(queue: JobQueue, settings: Settings) -> tuple[WorkerPool, str | None]:
    """The worker supervisor (not started yet), or no workers and a message saying why.

    Importing the supervisor never imports torch: workers are spawned processes. It does not
    recover at its start: `recover_at_launch` ran first, and the window shows that report.
    """
    try:
        from app.engine.workers.supervisor import Supervisor

        return Supervisor.for_app(queue, settings, recover_at_start=False), None
    except Exception as error:  # a broken install must still show the queue
        log.exception("cannot set up the workers")
        return NoWorkers(), f"Image generation is unavailable: {error}"
