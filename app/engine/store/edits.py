"""Edit with words: the one job an instruction makes, for every front end (`python -m app
edit N "make it night"` and `submit --edit-image`, the window's "Edit with words…", `POST
/api/v1/jobs/{id}/edit`), checked before anything is stored, so that each refuses the same
bad input in the same sentence. Here, beside inpaint (`repaint`), because an edit of a job
reads the stored job first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.engine.jobs.follow_ups import Check, NewJob
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.init_image import InvalidInitImage, prepare_init_image
from app.engine.jobs.params import (
    DEFAULT_MODEL,
    INIT_FROM_JOB,
    KIND_EDIT,
    RANDOM_SEED,
    GenerationParams,
    InvalidParameters,
    encode_edit_images,
)
from app.engine.jobs.queue import DEFAULT_MAX_ATTEMPTS, JobQueue, params_of
from app.engine.jobs.run_inputs import RunInputs
from app.engine.outputs.registry import output_of_job

# FluxKontextPipeline's own defaults: what an edit runs with unless told, where nothing
# says what its model's are (`DefaultsOf`).
EDIT_STEPS, EDIT_GUIDANCE = 28, 3.5

# The steps and cfg an edit on a model (by name) runs with unless told: its family's stock
# pipeline's defaults (request_checks.edit_defaults_of).
DefaultsOf = Callable[[str], tuple[int, float]]


def kontext_defaults(_model: str) -> tuple[int, float]:
    return EDIT_STEPS, EDIT_GUIDANCE


@dataclass(frozen=True)
class EditSettings:
    """What an edit asks for: the instruction, and the model ("": the edited job's) and
    sampling settings it runs with (None: the model's own for an edit); `more_images`:
    further input images (a file's, a paste's bytes), after the picture it edits, for a
    model that reads several (Qwen-Image-Edit Plus)."""

    instruction: str
    model: str = ""
    steps: int | None = None
    cfg: float | None = None
    seed: int = RANDOM_SEED
    more_images: Sequence[bytes] = ()


def edit_job(
    queue: JobQueue,
    job_id: int,
    settings: EditSettings,
    *,
    check: Check | None = None,
    defaults: DefaultsOf = kontext_defaults,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> NewJob:
    """An edit of job `job_id`'s picture at its size: a child of that job, waiting for it
    while it is unfinished. Raises `UserError` on bad input (nothing is stored)."""
    job = queue.get(job_id)  # JobNotFound first: "There is no job 12"
    kind = output_of_job(job.kind)
    if not kind.is_picture:
        raise InvalidParameters(f"job {job_id} makes a {kind.name}, not a picture to edit")
    more = more_input_pngs(settings.more_images)
    image = f"{INIT_FROM_JOB}{job_id}"
    params = edit_params(params_of(job), image, settings, check, defaults, more)
    inputs = RunInputs(edit_images=more)
    return NewJob(params, parents=[job_id], inputs=inputs, max_attempts=max_attempts)


def picture_edit_job(
    picture: bytes,
    settings: EditSettings,
    *,
    size: tuple[int, int] | None = None,
    parents: list[int] | None = None,
    check: Check | None = None,
    defaults: DefaultsOf = kontext_defaults,
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
    more = more_input_pngs(settings.more_images)
    params = edit_params(base, digest(prepared.png), settings, check, defaults, more)
    inputs = RunInputs(init_image=prepared.png, edit_images=more)
    return NewJob(params, parents=parents or [], inputs=inputs, max_attempts=max_attempts)


def more_input_pngs(pictures: Sequence[bytes]) -> tuple[bytes, ...]:
    """Each further input image as an RGB PNG at its own size (fitted to Easel's limits, as
    an init image is): the model reads each at its own size. A picture that cannot be one
    is refused naming it ("input image 2 is 24x24; ...")."""
    pngs = []
    for number, picture in enumerate(pictures, start=2):
        try:
            pngs.append(prepare_init_image(picture).png)
        except InvalidInitImage as error:  # its sentence, naming this picture
            named = str(error).replace("the init image", f"input image {number}", 1)
            raise InvalidInitImage(named) from error
    return tuple(pngs)


def edit_params(
    base: GenerationParams,
    image: str,
    settings: EditSettings,
    check: Check | None,
    defaults: DefaultsOf = kontext_defaults,
    more: Sequence[bytes] = (),
) -> GenerationParams:
    """`base`'s model and size as an edit of `image` (then of the PNGs `more`) by the
    instruction, with the model's own steps and cfg for an edit where `settings` gives
    none; refused (one sentence) where the model cannot edit or take them."""
    model = settings.model or base.model
    steps, cfg = defaults(model)
    params = GenerationParams(
        prompt=settings.instruction.strip(), model=model,
        steps=steps if settings.steps is None else settings.steps,
        cfg=cfg if settings.cfg is None else settings.cfg, width=base.width,
        height=base.height, seed=settings.seed, init_image=image, kind=KIND_EDIT,
        edit_images=encode_edit_images([digest(png) for png in more]),
    ).validated()  # fmt: skip
    if check is not None:
        check(params)
    return params
