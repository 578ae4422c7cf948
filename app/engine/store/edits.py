"""Edit with words: the one job an instruction makes, for every front end (`python -m app
edit N "make it night"` and `submit --edit-image`, the window's "Edit with words…", `POST
/api/v1/jobs/{id}/edit`), checked before anything is stored, so that each refuses the same
bad input in the same sentence. Here, beside inpaint (`repaint`), because an edit of a job
reads the stored job first."""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.jobs.follow_ups import Check, NewJob
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.init_image import prepare_init_image
from app.engine.jobs.params import (
    DEFAULT_MODEL,
    INIT_FROM_JOB,
    KIND_EDIT,
    RANDOM_SEED,
    GenerationParams,
    InvalidParameters,
)
from app.engine.jobs.queue import DEFAULT_MAX_ATTEMPTS, JobQueue, params_of
from app.engine.jobs.run_inputs import RunInputs
from app.engine.outputs.registry import output_of_job

# FluxKontextPipeline's own defaults: what an edit runs with unless told.
EDIT_STEPS, EDIT_GUIDANCE = 28, 3.5


@dataclass(frozen=True)
class EditSettings:
    """What an edit asks for: the instruction, and the model ("": the edited job's) and
    sampling settings it runs with."""

    instruction: str
    model: str = ""
    steps: int = EDIT_STEPS
    cfg: float = EDIT_GUIDANCE
    seed: int = RANDOM_SEED


def edit_job(
    queue: JobQueue,
    job_id: int,
    settings: EditSettings,
    *,
    check: Check | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> NewJob:
    """An edit of job `job_id`'s picture at its size: a child of that job, waiting for it
    while it is unfinished. Raises `UserError` on bad input (nothing is stored)."""
    job = queue.get(job_id)  # JobNotFound first: "There is no job 12"
    kind = output_of_job(job.kind)
    if not kind.is_picture:
        raise InvalidParameters(f"job {job_id} makes a {kind.name}, not a picture to edit")
    params = edit_params(params_of(job), f"{INIT_FROM_JOB}{job_id}", settings, check)
    return NewJob(params, parents=[job_id], max_attempts=max_attempts)


def picture_edit_job(
    picture: bytes,
    settings: EditSettings,
    *,
    size: tuple[int, int] | None = None,
    parents: list[int] | None = None,
    check: Check | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> NewJob:
    """An edit of `picture` (a file's, a paste's: PNG or JPEG bytes), stored with the job;
    drawn at `size` (None: the picture's own, fitted as an init image is)."""
    prepared = prepare_init_image(picture, size)
    base = GenerationParams(
        settings.instruction,
        model=settings.model or DEFAULT_MODEL,
        width=prepared.width,
        height=prepared.height,
    )
    params = edit_params(base, digest(prepared.png), settings, check)
    inputs = RunInputs(init_image=prepared.png)
    return NewJob(params, parents=parents or [], inputs=inputs, max_attempts=max_attempts)


def edit_params(
    base: GenerationParams, image: str, settings: EditSettings, check: Check | None
) -> GenerationParams:
    """`base`'s model and size as an edit of `image` by the instruction; refused (one
    sentence) where the model cannot edit or take it."""
    params = GenerationParams(
        prompt=settings.instruction.strip(), model=settings.model or base.model,
        steps=settings.steps, cfg=settings.cfg, width=base.width, height=base.height,
        seed=settings.seed, init_image=image, kind=KIND_EDIT,
    ).validated()  # fmt: skip
    if check is not None:
        check(params)
    return params
