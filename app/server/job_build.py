"""The body of `POST /api/v1/jobs` (`job_fields.JobBody`) as jobs, built as the command line
builds them: the same engine functions prepare each image (init image, mask, outpaint
canvas, control and reference images) and refuse what they refuse in their own sentences;
one job goes through `requests.submit`, a batch, wildcard prompt or grid through the
engine's group submits. Either way everything is checked before anything is stored, in one
transaction with the request's record and its Idempotency-Key."""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.engine import paths
from app.engine.generation.prompts.few_step import job_defaults
from app.engine.generation.request_checks import edit_defaults_of
from app.engine.jobs.api_jobs import EASEL_API
from app.engine.jobs.control_image import preprocess
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.grid_spec import AXIS_NAMES, GridAxisRefused, spec_from_axes
from app.engine.jobs.groups import Group, SeedMode, submit_dynamic, submit_grid
from app.engine.jobs.init_image import open_rgb, prepare_init_image
from app.engine.jobs.mask import OUTPAINT_STRENGTH, Extension, Fill, outpaint, prepare_mask
from app.engine.jobs.params import (
    INIT_FROM_JOB,
    KIND_EDIT,
    KIND_VIDEO,
    MAX_EDIT_IMAGES,
    RANDOM_SEED,
    ControlLayer,
    GenerationParams,
    InvalidParameters,
    ReferenceImage,
    encode_control,
    encode_edit_images,
    encode_reference,
)
from app.engine.jobs.wildcards import check_template, has_dynamic_syntax
from app.engine.store.edits import more_input_pngs
from app.engine.store.job_pictures import finished_picture, picture_job
from app.server.job_fields import ImageInput, JobBody, JobImage, LoraBody, OutpaintBody
from app.server.requests import (
    JobRequest,
    check_callback,
    checker,
    decode_image,
    fingerprint_of,
    keyed,
    source_for,
    submit,
    with_images,
)
from app.server.state import ServerState

ONE_JOB_ONLY = (
    "mask, outpaint, control, references and edit_image make one job: they cannot be "
    "combined with batch_count, combinatorial, grid or a wildcard prompt"
)


@dataclass(frozen=True)
class Made:
    """What a body made: its jobs (a group's cells, then its grid), first made or replayed."""

    jobs: tuple[int, ...]
    replayed: bool = False
    group: Group | None = None
    group_kind: str = ""


def submit_body(state: ServerState, body: JobBody, *, client: str, key: str | None) -> Made:
    """Check the body's jobs as a worker would and store them, or refuse having stored nothing."""
    params = few_step_defaults(state, body, base_params(body))
    # A dynamic prompt is a group even of one job (its template kept), as the CLI's.
    grouped = body.batch_count > 1 or body.combinatorial or body.grid is not None
    if grouped or has_dynamic_syntax(params.prompt):
        if body.last_image is not None:
            raise InvalidParameters("last_image belongs to one clip, not a batch or grid")
        return _submit_group(state, body, params, client=client, key=key)
    job = one_job(state, body, params)
    submitted = submit(state, job, api=EASEL_API, client=client, key=key)
    return Made(submitted.all, submitted.replayed)


def base_params(body: JobBody) -> GenerationParams:
    """The body's settings, its LoRAs in the prompt as the command line writes them; with
    `frames`, a clip (its count and the model checked at submit)."""
    params = GenerationParams(
        prompt=with_loras(body.prompt, body.loras), negative_prompt=body.negative_prompt,
        model=body.model, scheduler=body.scheduler, steps=body.steps, cfg=body.cfg,
        width=body.width or GenerationParams.width, height=body.height or GenerationParams.height,
        seed=body.seed, variation_seed=body.variation_seed,
        variation_strength=body.variation_strength, speed=body.speed,
        speed_threshold=body.speed_threshold, compile=body.compile,
        image_strength=body.image_strength, last_image_strength=body.last_image_strength,
        last_image_frame=body.last_image_frame,
    )  # fmt: skip
    if body.frames is not None:
        params = replace(params, kind=KIND_VIDEO, frames=body.frames, fps=body.fps)
    return params


def few_step_defaults(
    state: ServerState, body: JobBody, params: GenerationParams
) -> GenerationParams:
    """A few-step LoRA's or model's (a distilled LTX-Video's) steps, CFG and schedule where
    the body gave none: stored with the job, so a resume and another machine run what was
    applied."""
    search = state.settings.model_search_path()
    return job_defaults(params, body.model_fields_set, search, names_only=True).params


def with_loras(prompt: str, loras: list[LoraBody]) -> str:
    """`prompt` with a `<lora:NAME:WEIGHT>` tag for each LoRA (what a worker loads)."""
    tags = [f"<lora:{lora.name}:{lora.weight:g}>" for lora in loras]
    return " ".join([prompt, *tags]) if tags else prompt


def one_job(state: ServerState, body: JobBody, params: GenerationParams) -> JobRequest:
    """A single job: its init image (or outpaint canvas), mask, control and references."""
    if body.edit_image is not None:
        job = _as_edit(state, body, params)
    elif body.outpaint is not None:
        job = _outpainted(state, body, body.outpaint, params)
    else:
        job = _with_init(state, body, params)
    job = _with_mask(state, body, job)
    params, control_pngs = _with_control(state, body, job.params)
    params, reference_pngs = _with_references(state, body, params)
    last = None if body.last_image is None else decode_image(body.last_image, "last image")
    return replace(
        job, params=params, control_pngs=control_pngs, reference_pngs=reference_pngs,
        last_image=last,
    )  # fmt: skip


def _as_edit(state: ServerState, body: JobBody, params: GenerationParams) -> JobRequest:
    """An edit (Flux.1 Kontext, Qwen-Image-Edit): the prompt is the instruction, `edit_image`
    the picture it edits (or a list: that picture, then the further input images a model
    that reads several takes, each stored with the job); a job's picture makes the edit its
    child, drawn at its size, as `edit N` does."""
    if body.init_image is not None or body.mask is not None or body.outpaint is not None:
        raise InvalidParameters(
            "an edit takes its picture as edit_image: give no init_image, mask or outpaint"
        )
    edit_image = body.edit_image  # one picture, or the list of them
    given = edit_image if isinstance(edit_image, list) else [edit_image] if edit_image else []
    if not given or len(given) > MAX_EDIT_IMAGES:
        raise InvalidParameters(
            f"an edit reads 1 to {MAX_EDIT_IMAGES} input images, not {len(given)}"
        )
    edited, *more = given
    pngs = more_input_pngs(
        [image_bytes(state, image, f"input image {n}") for n, image in enumerate(more, 2)]
    )
    names = encode_edit_images([digest(png) for png in pngs])
    picture = body.model_copy(update={"init_image": edited})
    params = _edit_defaults(state, body, replace(params, kind=KIND_EDIT, edit_images=names))
    params = few_step_defaults(state, body, params)  # a Lightning LoRA's over the model's
    return replace(_with_init(state, picture, params), edit_pngs=pngs)


def _edit_defaults(state: ServerState, body: JobBody, params: GenerationParams) -> GenerationParams:
    """The model's own steps and cfg for an edit where the request gives none (Qwen-Image-Edit
    50 and 4, Kontext 28 and 3.5), as the command line's and the window's edits."""
    search = state.settings.model_search_path()
    steps, cfg = edit_defaults_of(search, names_only=True)(params.model)
    given = body.model_fields_set
    return replace(
        params,
        steps=params.steps if "steps" in given else steps,
        cfg=params.cfg if "cfg" in given else cfg,
    )


def _request(body: JobBody, params: GenerationParams) -> JobRequest:
    return JobRequest(
        params, count=body.count, parents=tuple(body.parents), priority=body.priority,
        max_attempts=body.max_attempts, callback_url=body.callback_url,
    )  # fmt: skip


def _with_init(state: ServerState, body: JobBody, params: GenerationParams) -> JobRequest:
    """img2img: base64 bytes stored with the job, or a job's picture it waits for (at that
    job's size unless the body gives one), as `inpaint N` and the window's edits do."""
    image = body.init_image
    sized = body.width is not None or body.height is not None
    if image is None:
        return _request(body, params)
    params = replace(params, strength=body.strength)
    if isinstance(image, JobImage):
        parent = picture_job(state.queue, image.job)
        params = replace(
            params, init_image=f"{INIT_FROM_JOB}{image.job}",
            width=body.width or parent.width, height=body.height or parent.height,
        )  # fmt: skip
        job = _request(body, params)
        return replace(job, parents=(*job.parents, image.job))
    data = decode_image(image)
    if body.mask is not None and body.mask.only_masked and not sized:
        # The job is drawn at the init image's (fitted) size, as `submit --only-masked`.
        prepared = prepare_init_image(data)
        params = replace(params, width=prepared.width, height=prepared.height)
        sized = True
    return replace(_request(body, params), init_image=data, init_sized=sized)


def _outpainted(
    state: ServerState, body: JobBody, spec: OutpaintBody, params: GenerationParams
) -> JobRequest:
    """The init image's canvas grown and its new area to paint (the engine's `outpaint`)."""
    if body.init_image is None:
        raise InvalidParameters("outpaint needs init_image (the image to extend)")
    if body.mask is not None:
        raise InvalidParameters("outpaint makes its own mask (the new area): give no mask")
    parents: tuple[int, ...] = ()
    if isinstance(body.init_image, JobImage):
        outputs = state.settings.outputs_path()
        stored, image = finished_picture(state.queue, body.init_image.job, outputs, to="extend")
        fill_seed, parents = stored.seed, (body.init_image.job,)
    else:
        image, fill_seed = decode_image(body.init_image), params.seed
    extension = Extension(spec.left, spec.right, spec.top, spec.bottom)
    canvas = outpaint(image, extension, Fill(spec.fill), seed=max(fill_seed, 0))
    params = replace(
        params, width=canvas.width, height=canvas.height, strength=OUTPAINT_STRENGTH,
        mask_blur=spec.blur, only_masked=False,
    )  # fmt: skip
    job = _request(body, params)
    return replace(
        job, parents=(*job.parents, *parents), init_image=canvas.image_png, mask=canvas.mask_png
    )  # fmt: skip


def _with_mask(state: ServerState, body: JobBody, job: JobRequest) -> JobRequest:
    """Inpaint: the mask checked against the image it repaints (its own size, as the command
    line checks it), then fitted to the job's image by `requests.submit`."""
    mask = body.mask
    if mask is None:
        return job
    if body.init_image is None:
        raise InvalidParameters("mask needs init_image (the image to repaint)")
    data = image_bytes(state, mask.image, "mask")
    if job.init_image is not None:
        source_size = open_rgb(job.init_image).size
    else:  # a job's picture, at that job's size
        parent = state.queue.get(job.parents[-1])
        source_size = (parent.width, parent.height)
    prepare_mask(data, source_size)  # the same size, and something to repaint
    params = replace(
        job.params, mask_blur=mask.blur, only_masked=mask.only_masked, mask_padding=mask.padding
    )  # fmt: skip
    return replace(job, params=params, mask=data)


def _with_control(
    state: ServerState, body: JobBody, params: GenerationParams
) -> tuple[GenerationParams, tuple[bytes, ...]]:
    """Each control layer's image preprocessed once, here (as `submit --control`)."""
    layers, pngs = [], []
    for index, layer in enumerate(body.control):
        png = preprocess(layer.module, image_bytes(state, layer.image, f"control {index} image"))
        layers.append(ControlLayer(digest(png), layer.model, layer.module, layer.weight,
                                   layer.start, layer.end, layer.type))  # fmt: skip
        pngs.append(png)
    return (replace(params, control=encode_control(layers)) if layers else params), tuple(pngs)


def _with_references(
    state: ServerState, body: JobBody, params: GenerationParams
) -> tuple[GenerationParams, tuple[bytes, ...]]:
    """Each reference image checked and stored as an RGB PNG (as `submit --reference`)."""
    references, pngs = [], []
    for index, reference in enumerate(body.references):
        png = preprocess("none", image_bytes(state, reference.image, f"reference {index} image"))
        references.append(ReferenceImage(digest(png), reference.model, reference.weight))
        pngs.append(png)
    if not references:
        return params, ()
    return replace(params, reference=encode_reference(references)), tuple(pngs)


def image_bytes(state: ServerState, image: ImageInput, what: str) -> bytes:
    """An image field's bytes: its base64, or the finished picture of the job it names."""
    if isinstance(image, JobImage):
        outputs = state.settings.outputs_path()
        return finished_picture(state.queue, image.job, outputs, to="use")[1]
    return decode_image(image, what)


# --- groups: batches, wildcard prompts, grids ---------------------------------------------------


def _submit_group(
    state: ServerState, body: JobBody, params: GenerationParams, *, client: str, key: str | None
) -> Made:
    """A batch (seed modes, variation seeds), a wildcard prompt or an X/Y/Z grid, as one
    group in one transaction (`groups.submit_dynamic`, `submit_grid`)."""
    if body.mask or body.outpaint or body.control or body.references or body.edit_image:
        raise InvalidParameters(ONE_JOB_ONLY)
    if body.count != 1:
        raise InvalidParameters("count makes a seed batch of one job's settings: for a group, "
                                "give batch_count instead")  # fmt: skip
    if body.grid is not None and (body.batch_count > 1 or body.combinatorial):
        raise GridAxisRefused("a grid is a group of its own: give no batch_count or combinatorial")
    job = _with_init(state, body, params)
    params, init_png, _mask = with_images(job)
    params = params.validated()
    folder = paths.wildcards_dir()
    if has_dynamic_syntax(params.prompt):
        check_template(params.prompt, folder)  # a missing file or a loop: refused now
    check_callback(state, body.callback_url)
    content = {"params": params.to_dict(), "body": body.model_dump(exclude={"init_image"}),
               "init": fingerprint_of(init_png.hex()) if init_png else None}  # fmt: skip
    attempts = body.max_attempts or state.settings.max_attempts
    request_key = keyed(state, key, content) if key is not None else None
    hook = state.records.hook(EASEL_API, client, body.callback_url)
    source, check = source_for(client), checker(state)
    if body.grid is not None:
        axes = [(name, getattr(body.grid, name)) for name in AXIS_NAMES]
        group = submit_grid(
            state.queue, params, spec_from_axes([(n, text) for n, text in axes if text]),
            wildcards=folder, init_png=init_png, parents=job.parents, priority=body.priority,
            max_attempts=attempts, source=source, check=check, key=request_key, with_jobs=hook,
        )  # fmt: skip
        return _made(group, "grid")
    mode = body.seed_mode or (SeedMode.RANDOM if params.seed == RANDOM_SEED else SeedMode.INCREMENT)
    group = submit_dynamic(
        state.queue, params, body.batch_count, mode, folder, combinatorial=body.combinatorial,
        init_png=init_png, parents=job.parents, priority=body.priority, max_attempts=attempts,
        source=source, check=check, key=request_key, with_jobs=hook,
    )  # fmt: skip
    return _made(group, "wildcards" if has_dynamic_syntax(params.prompt) else "batch")


def _made(group: Group, kind: str) -> Made:
    composer = (group.composer,) if group.composer is not None else ()
    return Made((*group.jobs, *composer), group.replayed, group, kind)
