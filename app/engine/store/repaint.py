"""Inpaint and outpaint of a stored job: the one job each makes, checked before anything is
stored, for every front end (`python -m app inpaint/outpaint`, `POST /api/v1/jobs/{id}/
inpaint|outpaint`), so that the same bad input is refused in the same sentence by each.
Here, above the jobs, because an outpaint reads the parent's stored image."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from app.engine.jobs.follow_ups import Check, NewJob
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.mask import OUTPAINT_STRENGTH, Extension, Fill, outpaint, prepare_mask
from app.engine.jobs.params import (
    DEFAULT_MASK_BLUR,
    DEFAULT_MASK_PADDING,
    INIT_FROM_JOB,
    RANDOM_SEED,
    GenerationParams,
)
from app.engine.jobs.queue import DEFAULT_MAX_ATTEMPTS, JobQueue, params_of
from app.engine.jobs.run_inputs import RunInputs
from app.engine.store.job_pictures import finished_picture, picture_job

DEFAULT_INPAINT_STRENGTH = 0.75  # what AUTOMATIC1111 starts its img2img tab with


@dataclass(frozen=True)
class MaskSettings:
    """How a mask is applied: its blur, and whether only its box (plus padding) is drawn."""

    blur: int = DEFAULT_MASK_BLUR
    only_masked: bool = False
    padding: int = DEFAULT_MASK_PADDING

    def applied(self, params: GenerationParams) -> GenerationParams:
        return replace(params, mask_blur=self.blur, only_masked=self.only_masked,
                       mask_padding=self.padding)  # fmt: skip


@dataclass(frozen=True)
class Repaint:
    """What the new job paints: its prompt (empty: the parent's) and seed."""

    prompt: str = ""
    seed: int = RANDOM_SEED
    # The model that paints it and its cfg ("" and None: the parent's): a Flux.1 Fill model
    # (guidance 30) repainting a Flux.1 dev image, say.
    model: str = ""
    cfg: float | None = None

    def over(self, parent: GenerationParams) -> GenerationParams:
        """`parent` with this prompt, seed, model and cfg."""
        cfg = parent.cfg if self.cfg is None else self.cfg
        return replace(parent, prompt=self.prompt or parent.prompt, seed=self.seed,
                       model=self.model or parent.model, cfg=cfg)  # fmt: skip


def inpaint_job(
    queue: JobQueue,
    job_id: int,
    mask: bytes,
    *,
    repaint: Repaint = Repaint(),
    strength: float = DEFAULT_INPAINT_STRENGTH,
    settings: MaskSettings = MaskSettings(),
    check: Check | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> NewJob:
    """A repaint of job `job_id`'s image where `mask` (PNG or JPEG bytes, the image's size)
    is white; it waits for the job. Raises `UserError` on bad input."""
    parent = params_of(picture_job(queue, job_id))
    mask_png = prepare_mask(mask, (parent.width, parent.height))
    params = replace(
        repaint.over(settings.applied(parent)),
        init_image=f"{INIT_FROM_JOB}{job_id}", strength=strength, mask=digest(mask_png),
    ).validated()  # fmt: skip
    if check is not None:
        check(params)
    inputs = RunInputs(mask=mask_png)
    return NewJob(params, parents=[job_id], inputs=inputs, max_attempts=max_attempts)


def outpaint_job(
    queue: JobQueue,
    job_id: int,
    extension: Extension,
    *,
    fill: Fill = Fill.EDGE,
    repaint: Repaint = Repaint(),
    mask_blur: int = DEFAULT_MASK_BLUR,
    outputs_dir: Path | None = None,
    check: Check | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> NewJob:
    """An extension of job `job_id`'s finished image by `extension` on each side, the new
    area filled as `fill` says and painted. `outputs_dir`: where a shared queue's images may
    be read on this machine (else the database's copy)."""
    stored, image_png = finished_picture(queue, job_id, outputs_dir, to="extend")
    parent = params_of(stored)
    canvas = outpaint(image_png, extension, fill, seed=max(parent.seed, 0))
    params = replace(
        repaint.over(parent), width=canvas.width, height=canvas.height,
        init_image=digest(canvas.image_png), strength=OUTPAINT_STRENGTH,
        mask=digest(canvas.mask_png), mask_blur=mask_blur, only_masked=False,
    ).validated()  # fmt: skip
    if check is not None:
        check(params)  # beyond the model's size limit: refused here
    inputs = RunInputs(canvas.image_png, canvas.mask_png)
    return NewJob(params, parents=[job_id], inputs=inputs, max_attempts=max_attempts)
