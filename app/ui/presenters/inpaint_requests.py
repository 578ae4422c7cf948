"""What the mask editor's "Inpaint" and "Extend canvas" submit, as jobs (no Qt, no torch).

An Easel result is edited as a child of its job (its output is the init image, the job a
parent); a dropped or pasted file is stored with the job. The mask is checked here, at
submit, as on the command line: one sentence, nothing stored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from app.engine.jobs.params import (
    DEFAULT_MASK_BLUR,
    DEFAULT_MASK_PADDING,
    INIT_FROM_JOB,
    RANDOM_SEED,
    GenerationParams,
)
from app.engine.jobs.run_inputs import RunInputs

if TYPE_CHECKING:
    from app.engine.jobs.follow_ups import NewJob
    from app.engine.jobs.mask import Extension, Fill

DEFAULT_INPAINT_STRENGTH = 0.75  # A1111's inpaint tab starts here
OUTPAINT_STRENGTH = 1.0


@dataclass(frozen=True)
class EditedImage:
    """The picture the editor opened: an RGB PNG, and the job it came from if any."""

    png: bytes
    width: int
    height: int
    job_id: int | None = None
    params: GenerationParams | None = None  # the job's settings, or the form's


@dataclass(frozen=True)
class InpaintSettings:
    prompt: str
    strength: float = DEFAULT_INPAINT_STRENGTH
    mask_blur: int = DEFAULT_MASK_BLUR
    only_masked: bool = False
    padding: int = DEFAULT_MASK_PADDING


def inpaint_job(
    image: EditedImage, settings: InpaintSettings, mask_png: bytes, max_attempts: int = 3
) -> NewJob:
    # Imported at submit, not at window start-up: `mask` reads images with PIL, and
    # `follow_ups` holds the queue's SQL (SQLAlchemy, SQLModel).
    from app.engine.jobs.follow_ups import NewJob
    from app.engine.jobs.mask import prepare_mask

    mask = prepare_mask(mask_png, (image.width, image.height))
    params = replace(
        _base(image, settings.prompt), strength=settings.strength, mask_blur=settings.mask_blur,
        only_masked=settings.only_masked, mask_padding=settings.padding, seed=RANDOM_SEED,
    )  # fmt: skip
    if image.job_id is not None:
        params = replace(params, init_image=f"{INIT_FROM_JOB}{image.job_id}")
        inputs = RunInputs(mask=mask)
        return NewJob(params, parents=[image.job_id], inputs=inputs, max_attempts=max_attempts)
    inputs = RunInputs(init_image=image.png, mask=mask)
    return NewJob(params, inputs=inputs, max_attempts=max_attempts)


def outpaint_job(
    image: EditedImage, prompt: str, extension: Extension, fill: Fill, max_attempts: int = 3
) -> NewJob:
    from app.engine.jobs.follow_ups import NewJob  # as in `inpaint_job`: not at start-up
    from app.engine.jobs.mask import outpaint

    base = _base(image, prompt)
    canvas = outpaint(image.png, extension, fill, seed=max(base.seed, 0))
    params = replace(
        base, width=canvas.width, height=canvas.height, strength=OUTPAINT_STRENGTH,
        seed=RANDOM_SEED, only_masked=False,
    )  # fmt: skip
    parents = [image.job_id] if image.job_id is not None else []
    return NewJob(
        params, parents=parents, inputs=RunInputs(canvas.image_png, canvas.mask_png),
        max_attempts=max_attempts,
    )  # fmt: skip


def _base(image: EditedImage, prompt: str) -> GenerationParams:
    base = image.params or GenerationParams(prompt or "")
    return replace(
        base, prompt=prompt or base.prompt, width=image.width, height=image.height,
        # The job's own inputs: not these.
        init_image="", mask="", control="", reference="", edit_images="",
    )  # fmt: skip
