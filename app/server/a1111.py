"""`/sdapi/v1`: the part of AUTOMATIC1111's API that existing clients speak.

Each image asked for is a normal durable Easel job (batch_size x n_iter of them), visible
in the window with its timeline; the request waits for them and answers as A1111 does:
base64 images and the `info` JSON (seed, all_seeds, infotexts, ...). A client that goes
away does not take its jobs with it: they run, and stay in the history.
"""

from __future__ import annotations

import base64
import json
import random
import time
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonDict
from starlette.concurrency import run_in_threadpool

from app import __version__
from app.engine.generation.families.video_params import video_families
from app.engine.generation.files.sources import resolve_model_name
from app.engine.jobs.api_jobs import A1111_API
from app.engine.jobs.follow_ups import FollowUps, Upscale
from app.engine.jobs.params import (
    MAX_IMAGES,
    MAX_SEED,
    MAX_STEPS,
    MAX_UPSCALED_SIZE,
    RANDOM_SEED,
    SCHEDULERS,
    GenerationParams,
)
from app.engine.jobs.queue import Job, JobNotFound, params_of
from app.engine.jobs.states import JobStatus, TransitionNotAllowed
from app.engine.outputs.image import IMAGE, a1111_parameters
from app.engine.outputs.registry import output_of_job
from app.engine.store.stored_files import output_bytes
from app.errors import BadInput, EaselError
from app.server.a1111_controlnet import control_job
from app.server.a1111_fields import (
    Endpoint,
    UnsupportedRequest,
    check_fields,
    check_no_video_fields,
    compile_asked,
    model_name,
    refuse_video_model,
)
from app.server.a1111_speed import speed_asked, without_speed_scripts
from app.server.requests import (
    CFG_LIMITS,
    PROMPT_LIMITS,
    SEED_LIMITS,
    SIDE_LIMITS,
    STEPS_LIMITS,
    TEXT_LIMITS,
    JobRequest,
    client_name,
    decode_image,
    source_for,
    submit,
)
from app.server.state import SLOT_KEY, ServerState, Slot, SlotKind

router = APIRouter(prefix="/sdapi/v1", tags=["automatic1111"])
# How often a waiting request reads its jobs' statuses: quickly when only the store tells
# it (`--no-workers`: the window's or a peer's workers run them), seldom when this server's
# own workers wake it as they settle a job (`ServerState.settled`), for jobs a peer runs.
WAIT_POLL_S = 0.05
WOKEN_POLL_S = 0.5

# A1111's sampler names (and the old k-diffusion aliases) -> Easel's schedulers, which are
# named as A1111 names them (app/engine/jobs/params.py SCHEDULERS; the worker maps each to
# its diffusers scheduler in app/engine/generation/loop/schedulers.py).
SAMPLER_ALIASES: dict[str, tuple[str, ...]] = {
    "Euler": ("k_euler",),
    "Euler a": ("k_euler_a", "k_euler_ancestral"),
    "DDIM": ("ddim",),
    "DPM++ 2M": ("k_dpmpp_2m",),
    "DPM++ 2M Karras": ("k_dpmpp_2m_ka",),
    "Euler Karras": (),
    "UniPC": (),
}
_BY_NAME = {
    name.lower(): easel for easel, aliases in SAMPLER_ALIASES.items() for name in (easel, *aliases)
}
# A1111 1.9+ sends the noise schedule apart; Easel's schedulers use the model's own.
SCHEDULES_ACCEPTED = {"", "automatic", "normal", "uniform"}


UNSUPPORTED: JsonDict = {"enum": [False, None]}
SAMPLER_NAMES: JsonDict = {
    "enum": [None, *SAMPLER_ALIASES, *(a for n in SAMPLER_ALIASES.values() for a in n)]
}
# The fields Easel reads; every other field of A1111's request is checked against the
# table in `a1111_fields` (ignored, refused when set, or refused as unknown).
STRICT = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": False})


class _Common(BaseModel):
    model_config = STRICT

    prompt: str = Field("", max_length=20_000, json_schema_extra=PROMPT_LIMITS)
    negative_prompt: str = Field("", max_length=20_000, json_schema_extra=TEXT_LIMITS)
    seed: int = Field(-1, json_schema_extra=SEED_LIMITS)
    subseed: int = Field(-1, json_schema_extra=SEED_LIMITS)
    subseed_strength: float = Field(0.0, ge=0, le=1)
    sampler_name: str | None = Field(None, json_schema_extra=SAMPLER_NAMES)
    sampler_index: str | None = Field(None, json_schema_extra=SAMPLER_NAMES)
    scheduler: str | None = None
    batch_size: int = Field(1, ge=1, le=MAX_IMAGES)
    n_iter: int = Field(1, ge=1, le=MAX_IMAGES)
    steps: int = Field(20, json_schema_extra=STEPS_LIMITS)
    cfg_scale: float = Field(7.0, json_schema_extra=CFG_LIMITS)
    width: int = Field(512, json_schema_extra=SIDE_LIMITS)
    height: int = Field(512, json_schema_extra=SIDE_LIMITS)
    override_settings: dict[str, Any] | None = None
    alwayson_scripts: dict[str, Any] | None = None
    send_images: bool = True


class Txt2Img(_Common):
    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "additionalProperties": False,
            "examples": [{"prompt": "a red circle", "width": 64, "height": 64}],
        },
    )

    denoising_strength: float | None = Field(None, gt=0, le=1)  # the hires pass's
    enable_hr: bool = False
    hr_scale: float = Field(2.0, gt=0, le=8)
    hr_upscaler: str | None = None
    hr_second_pass_steps: int = Field(0, ge=0, json_schema_extra={"maximum": MAX_STEPS})
    hr_resize_x: int = Field(0, ge=0, le=MAX_UPSCALED_SIZE)
    hr_resize_y: int = Field(0, ge=0, le=MAX_UPSCALED_SIZE)


class Img2Img(_Common):
    init_images: list[str] = Field(default_factory=list, max_length=1)
    denoising_strength: float = 0.75
    resize_mode: int = 0
    mask: str | None = None
    mask_blur: int | None = None
    mask_blur_x: int = 4
    mask_blur_y: int = 4
    inpainting_fill: int = 0
    inpaint_full_res: bool = True
    inpaint_full_res_padding: int = 0
    inpainting_mask_invert: int = Field(0, ge=0, le=1)


class PngInfoBody(BaseModel):
    image: str


def state_of(request: Request) -> ServerState:
    state: ServerState = request.app.state.easel
    return state


@router.post("/txt2img")
async def txt2img(body: Txt2Img, request: Request) -> dict[str, Any]:
    return await _generate(body, request, Endpoint.TXT2IMG)


@router.post("/img2img")
async def img2img(body: Img2Img, request: Request) -> dict[str, Any]:
    if len(body.init_images) != 1:
        raise UnsupportedRequest("img2img needs exactly one image in init_images")
    if body.resize_mode != 0:
        raise UnsupportedRequest(
            f"resize_mode {body.resize_mode} is not supported: Easel only resizes (0, just resize)"
        )
    return await _generate(body, request, Endpoint.IMG2IMG)


def sent_fields(body: BaseModel) -> dict[str, Any]:
    """The fields the client sent (declared or not), with their values."""
    declared = {name: getattr(body, name) for name in body.model_fields_set}
    return {**declared, **(body.model_extra or {})}


async def _generate(
    body: Txt2Img | Img2Img, request: Request, endpoint: Endpoint
) -> dict[str, Any]:
    state = state_of(request)
    model = (body.override_settings or {}).get("sd_model_checkpoint") or state.sd_model
    name = model_name(str(model))
    sampler = body.sampler_name or body.sampler_index or _default_sampler(state, name)
    scheduler = easel_scheduler(sampler, body.scheduler)
    check_no_video_fields(sent_fields(body))
    check_fields(sent_fields(body), endpoint, scheduler.removesuffix(" Karras"))
    await run_in_threadpool(_check_draws_images, name, state)  # reads the model folders
    rng = random.SystemRandom()
    seed = body.seed if body.seed != -1 else rng.randint(0, MAX_SEED)
    variation_seed = body.subseed if body.subseed_strength > 0 else RANDOM_SEED
    if body.subseed_strength > 0 and variation_seed == RANDOM_SEED:
        variation_seed = rng.randint(0, MAX_SEED)  # answered in `info`, as A1111 does
    settings = body.override_settings or {}
    speed = speed_asked(settings, body.alwayson_scripts or {})
    params = GenerationParams(
        prompt=body.prompt, negative_prompt=body.negative_prompt, model=name,
        scheduler=scheduler, steps=body.steps, cfg=body.cfg_scale, width=body.width,
        height=body.height, seed=seed, variation_seed=variation_seed,
        variation_strength=body.subseed_strength, compile=compile_asked(settings),
        speed=speed.speed, speed_threshold=speed.threshold,
    )  # fmt: skip
    count = body.batch_size * body.n_iter
    if count > MAX_IMAGES:
        raise BadInput(f"batch_size x n_iter is {count}; at most {MAX_IMAGES} images a request")
    # Decoding the images and preprocessing control images take CPU time: on a thread,
    # so that other requests are not held meanwhile.
    job = await run_in_threadpool(_job_of, body, JobRequest(params, count=count), state)
    return _response(body, await submit_and_wait(request, state, job), state)


def _check_draws_images(model: str, state: ServerState) -> None:
    """Refuse a video model in one sentence saying where clips are asked for (the submit
    check's own refusal would ask for frames, which A1111's requests cannot send). A
    model not found is left to that check, which names it."""
    try:
        arch = resolve_model_name(model, state.settings.model_search_path()).architecture
    except EaselError:
        return
    if arch is not None and arch in video_families():
        raise refuse_video_model(model, arch.label)


def _job_of(body: Txt2Img | Img2Img, job: JobRequest, state: ServerState) -> JobRequest:
    """The request's job with its images: init image and mask (img2img), hires fix
    (txt2img) and ControlNet units."""
    if isinstance(body, Img2Img):
        job = _img2img_job(body, job)
    else:
        job = replace(job, follow_ups=hires_follow_ups(body, state))
    scripts = without_speed_scripts(body.alwayson_scripts or {})  # read by `speed_asked`
    return control_job(scripts, job, state, hires=getattr(body, "enable_hr", False))


def _img2img_job(body: Img2Img, job: JobRequest) -> JobRequest:
    params = replace(job.params, strength=body.denoising_strength)
    init = decode_image(body.init_images[0])
    if not body.mask:
        return replace(job, params=params, init_image=init)
    if body.inpainting_fill != 1:
        raise UnsupportedRequest(
            f"inpainting_fill {body.inpainting_fill} is not supported: Easel repaints "
            "from the image itself (1, original)"
        )
    blur = body.mask_blur
    if blur is None:
        if body.mask_blur_x != body.mask_blur_y:
            raise UnsupportedRequest(
                "Easel blurs a mask alike both ways: give mask_blur_x = mask_blur_y"
            )
        blur = body.mask_blur_x
    mask = decode_image(body.mask, "mask")
    if body.inpainting_mask_invert:
        mask = inverted(mask)
    params = replace(
        params, mask_blur=blur, only_masked=body.inpaint_full_res,
        mask_padding=body.inpaint_full_res_padding,
    )  # fmt: skip
    return replace(job, params=params, init_image=init, mask=mask)


def inverted(mask: bytes) -> bytes:
    """The mask with black and white swapped (A1111's inpainting_mask_invert)."""
    from PIL import ImageOps

    from app.engine.jobs.mask import open_mask, png_bytes

    return png_bytes(ImageOps.invert(open_mask(mask)))


# A1111's hires upscalers that resize the image as Easel's Lanczos does ("None": A1111
# resizes with Lanczos after its no-op upscaler); its latent ones work on the latents.
LANCZOS_NAMES = {"", "none", "lanczos"}


def hires_follow_ups(body: Txt2Img, state: ServerState) -> FollowUps:
    """A1111's hires fix as Easel's: an upscale job following each image."""
    if not body.enable_hr:
        return FollowUps()
    scale = hires_scale(body)
    upscaler = (body.hr_upscaler or "").strip()
    if upscaler.lower() in LANCZOS_NAMES:
        upscaler = ""
    elif upscaler.lower().startswith("latent") or upscaler.lower() == "nearest":
        raise UnsupportedRequest(
            f"the hires upscaler {upscaler!r} is not supported: Easel resizes the image, not "
            "its latents (use Lanczos or an upscaler model from GET /sdapi/v1/upscalers)"
        )
    else:
        from app.engine.generation.post.upscalers import check_upscaler

        check_upscaler(upscaler, state.settings.model_search_path(), names_only=True)
    strength = body.denoising_strength if body.denoising_strength is not None else 0.75
    return FollowUps(upscale=Upscale(scale, strength, upscaler, steps=body.hr_second_pass_steps))


def hires_scale(body: Txt2Img) -> float:
    """The scale of A1111's hires fix: hr_scale, or hr_resize_x/y at the same aspect ratio."""
    x, y = body.hr_resize_x, body.hr_resize_y
    if not x and not y:
        return body.hr_scale
    scale = x / body.width if x else y / body.height
    if x and y and (round(body.width * scale), round(body.height * scale)) != (x, y):
        raise UnsupportedRequest(
            f"hr_resize_x x hr_resize_y ({x}x{y}) must keep the first pass's aspect ratio "
            f"({body.width}x{body.height}): Easel's hires fix scales, it does not crop"
        )
    return scale


async def submit_and_wait(request: Request, state: ServerState, job: JobRequest) -> list[Job]:
    """Store `job` (as its client, with its Idempotency-Key) and wait for its jobs: for a
    hires fix, the upscale of each image that succeeded stands for it."""
    client = client_name(request)
    key = request.headers.get("idempotency-key")
    waiting = state.slots.take(SlotKind.WAITING)  # before storing: a 503 stores nothing
    if waiting is None:
        raise HTTPException(503, state.slots.busy(SlotKind.WAITING), {"Retry-After": "1"})
    try:
        submitted = await run_in_threadpool(
            lambda: submit(state, job, api=A1111_API, client=client, key=key)
        )
        # Stored: from here it only waits, which must not keep /progress, /interrupt, status
        # and cancel out (they need the in-flight slots), so it waits in a slot of its own.
        in_flight: Slot | None = request.scope.get(SLOT_KEY)
        if in_flight is not None:
            in_flight.release()
        with state.waiting_for(tuple(submitted.all)):
            jobs = await _wait(request, state, list(submitted.jobs))
            if submitted.follow_ups:  # the hires fix: each image's upscale is the answer
                jobs = await _wait_follow_ups(request, state, jobs, submitted.follow_ups)
    finally:
        waiting.release()
    return jobs


async def _wait_follow_ups(
    request: Request, state: ServerState, parents: list[Job], follow_ups: tuple[int, ...]
) -> list[Job]:
    """The follow-up of each parent that succeeded, once done; a parent that did not stands
    for its own (its follow-up waits BLOCKED, for a retry of the parent)."""
    following = [
        (parent, child) for parent, child in zip(parents, follow_ups, strict=True)
        if parent.status == JobStatus.SUCCESS
    ]  # fmt: skip
    done = await _wait(request, state, [child for _parent, child in following])
    by_id = {job.id: job for job in done}
    children = {parent.id: by_id[child] for parent, child in following}
    return [children.get(parent.id, parent) for parent in parents]


async def _wait(request: Request, state: ServerState, job_ids: list[int]) -> list[Job]:
    # One reader reads the statuses of every waiting request's jobs (`JobWaits`); the jobs
    # are read whole once done.
    poll_s = WOKEN_POLL_S if state.own_workers else WAIT_POLL_S
    await state.waits.until_done(job_ids, poll_s, request.is_disconnected)
    return await run_in_threadpool(lambda: [state.queue.get(i) for i in job_ids])


def _response(body: _Common, jobs: list[Job], state: ServerState) -> dict[str, Any]:
    failed = [job for job in jobs if job.status in (JobStatus.FAILED, JobStatus.TIMEOUT)]
    done = [job for job in jobs if job.status == JobStatus.SUCCESS]
    if failed and not done:
        first = failed[0]
        raise HTTPException(500, f"Job {first.id} {first.status}: {first.error or 'no reason'}")
    images = []
    for job in done if body.send_images else []:
        if not output_of_job(job.kind).is_picture:
            continue  # A1111's `images` are still pictures (base64); other kinds are not
        data = output_bytes(state.queue.db, job)
        if data is not None:
            images.append(base64.b64encode(data).decode("ascii"))
    shown = done or jobs
    first = shown[0]
    infotexts = [a1111_parameters(params_of(job)) for job in shown]
    info = {
        "prompt": first.prompt, "all_prompts": [j.prompt for j in shown],
        "negative_prompt": first.negative_prompt,
        "all_negative_prompts": [j.negative_prompt for j in shown],
        "seed": first.seed, "all_seeds": [j.seed for j in shown],
        "subseed": first.variation_seed, "all_subseeds": [j.variation_seed for j in shown],
        "subseed_strength": first.variation_strength,
        "width": first.width, "height": first.height, "sampler_name": first.scheduler,
        "cfg_scale": first.cfg, "steps": first.steps, "batch_size": body.batch_size,
        "restore_faces": False, "face_restoration_model": None, "sd_model_name": first.model,
        "sd_model_hash": None, "seed_resize_from_w": -1, "seed_resize_from_h": -1,
        "denoising_strength": first.strength if first.init_image else None,
        "extra_generation_params": {}, "index_of_first_image": 0, "infotexts": infotexts,
        "styles": [], "job_timestamp": time.strftime("%Y%m%d%H%M%S"), "clip_skip": 1,
        "is_using_inpainting_conditioning": False, "version": f"easel-{__version__}",
        "easel_job_ids": [j.id for j in jobs],
        "easel_statuses": {str(j.id): j.status for j in jobs},
    }  # fmt: skip
    parameters = body.model_dump(exclude={"init_images", "mask"})
    return {"images": images, "parameters": parameters, "info": json.dumps(info)}


def _default_sampler(state: ServerState, model: str) -> str:
    """A1111's default sampler ("Euler a"), or the model's own where it takes only its own:
    a flow-matching model (Flux, SD 3.5, ...) runs with Euler, as Forge picks for Flux."""
    from app.engine.generation.families.flow_params import samplers_for

    info = next((m for m in state.models() if m.name == model), None)
    own = samplers_for(info.architecture if info is not None else None)
    return own[0] if own else A1111_DEFAULT_SAMPLER


A1111_DEFAULT_SAMPLER = "Euler a"


def easel_scheduler(sampler: str | None, schedule: str | None) -> str:
    """The Easel scheduler for A1111's sampler name (and its 1.9+ schedule type)."""
    name = (sampler or A1111_DEFAULT_SAMPLER).strip()
    easel = _BY_NAME.get(name.lower())
    if easel is None:
        known = ", ".join(SAMPLER_ALIASES)
        raise UnsupportedRequest(f"unknown sampler {name!r} (Easel has: {known})")
    schedule_type = (schedule or "").strip().lower()
    if schedule_type == "karras" and f"{easel} Karras" in SAMPLER_ALIASES:
        return f"{easel} Karras"  # A1111 1.9+: the sampler and its schedule sent apart
    if schedule_type not in SCHEDULES_ACCEPTED and not (
        schedule_type == "karras" and easel.endswith(" Karras")
    ):
        raise UnsupportedRequest(
            f"the schedule type {schedule!r} is not supported with {easel} "
            "(Easel has Karras for DPM++ 2M and Euler, else the model's own)"
        )
    return easel


@router.get("/progress")
def progress(request: Request, skip_current_image: bool = False) -> dict[str, Any]:
    state = state_of(request)
    jobs = [state.queue.get(job_id) for job_id in state.records.unsettled(A1111_API)]
    running = [job for job in jobs if JobStatus(job.status).is_running]
    current = running[0] if running else None
    fraction = 0.0
    if jobs:
        done = sum(job.progress_step / job.progress_total if job.progress_total else 0.0
                   for job in jobs)  # fmt: skip
        fraction = min(1.0, done / len(jobs))
    eta = 0.0
    estimator = state.estimator()
    if jobs:
        from app.engine.history.eta import job_estimate

        eta = sum(job_estimate(estimator, job) or 0.0 for job in jobs)
    image = None
    if current is not None and not skip_current_image and current.id is not None:
        preview = state.preview(current.id)
        image = base64.b64encode(preview).decode("ascii") if preview else None
    return {
        "progress": round(fraction, 4), "eta_relative": round(eta, 2),
        "state": {"skipped": False, "interrupted": False, "job": f"job {current.id}"
                  if current else "", "job_count": len(jobs), "job_timestamp": "0",
                  "job_no": 0, "sampling_step": current.progress_step if current else 0,
                  "sampling_steps": current.progress_total if current else 0},
        "current_image": image, "textinfo": None,
    }  # fmt: skip


@router.post("/interrupt")
def interrupt(request: Request) -> dict[str, Any]:
    """Stop the generation in progress, as A1111 does: the A1111 jobs running now and the
    rest of their requests' batches; queued requests keep their turn. Answers which were
    cancelled, and the step each had reported when its cancel was committed."""
    return _stop_running(request, whole_batch=True, what="interrupt")


@router.post("/skip")
def skip(request: Request) -> dict[str, Any]:
    """Skip the image in progress, as A1111 does: the A1111 jobs running now are cancelled,
    the rest of their batches go on."""
    return _stop_running(request, whole_batch=False, what="skip")


def _stop_running(request: Request, *, whole_batch: bool, what: str) -> dict[str, Any]:
    state = state_of(request)
    source = source_for(client_name(request), A1111_API)
    targets: set[int] = set()
    for running_id in state.records.running(A1111_API):
        targets.update(state.batch_of(running_id) if whole_batch else (running_id,))
    cancelled, at_step = [], {}
    for job_id in sorted(targets):
        try:
            record = state.queue.cancel(job_id, source=source, message=f"{what} (A1111 API)")
        except (TransitionNotAllowed, JobNotFound):
            continue  # it finished (or was pruned) since the read: nothing left to stop
        if record.changed:
            cancelled.append(record.job_id)
            at_step[str(job_id)] = state.live_step(job_id)
    return {"cancelled": cancelled, "at_step": at_step}


@router.get("/sd-models")
def sd_models(request: Request) -> list[dict[str, Any]]:
    return [
        {
            "title": m.name,
            "model_name": m.name,
            "hash": None,
            "sha256": None,
            "filename": m.name,
            "config": None,
        }
        for m in state_of(request).models()
        if m.supported
    ]


@router.get("/loras")
def loras(request: Request) -> list[dict[str, Any]]:
    from app.engine.generation.prompts.loras import installed_loras

    search_path = state_of(request).settings.model_search_path()
    return [{"name": name, "alias": name, "path": path.name, "metadata": {}}
            for name, path in installed_loras(search_path).items()]  # fmt: skip


@router.get("/samplers")
def samplers() -> list[dict[str, Any]]:
    return [{"name": name, "aliases": list(SAMPLER_ALIASES.get(name, ())), "options": {}}
            for name in SCHEDULERS]  # fmt: skip


@router.get("/schedulers")
def schedulers() -> list[dict[str, Any]]:
    return [{"name": "automatic", "label": "Automatic", "aliases": None,
             "default_rho": -1, "need_inner_model": False}]  # fmt: skip


@router.get("/scripts")
def scripts() -> dict[str, list[str]]:
    return {"txt2img": [], "img2img": []}


@router.get("/options")
def get_options(request: Request) -> dict[str, Any]:
    state = state_of(request)
    return {"sd_model_checkpoint": state.sd_model, "sd_checkpoint_hash": None,
            "samples_format": IMAGE.suffix.lstrip(".")}  # fmt: skip


@router.post("/options")
def set_options(options: dict[str, Any], request: Request) -> None:
    """Only `sd_model_checkpoint` is taken (the model A1111 requests get); others are kept
    by the clients' own A1111 and mean nothing here."""
    state = state_of(request)
    wanted = options.get("sd_model_checkpoint")
    if wanted is None:
        return
    name = model_name(str(wanted))
    found = {m.name: m for m in state.models()}
    if name not in found or not found[name].supported:
        known = ", ".join(sorted(n for n, m in found.items() if m.supported))
        raise BadInput(f"there is no usable model {name!r} (models: {known})")
    state.sd_model = name


@router.post("/png-info")
def png_info(body: PngInfoBody) -> dict[str, Any]:
    """The text an image carries. The image may come from anyone: a picture too large to
    open (a decompression bomb) or a text chunk over the size read is 413, not an image 422,
    each in one sentence; nothing is decoded beyond its size and its text."""
    from app.engine.jobs.image_text import ImageTooLarge, check_image, read_image_text

    data = decode_image(body.image, "image")
    try:
        found = read_image_text(data)
        if found.refused:
            raise ImageTooLarge(f"the image cannot be read: {next(iter(found.refused.values()))}")
        check_image(data)
    except ImageTooLarge as error:
        raise HTTPException(413, str(error)) from None
    texts = dict(found.texts)
    info = texts.pop("parameters", "")
    return {"info": info, "items": texts, "parameters": parse_parameters(info)}


def parse_parameters(text: str) -> dict[str, Any]:
    """A1111's `parameters` text as fields: Prompt, Negative prompt, Steps, Sampler, ..."""
    if not text:
        return {}
    lines = text.split("\n")
    fields: dict[str, Any] = {}
    settings = lines[-1] if len(lines) > 1 and ": " in lines[-1] else ""
    body = lines[:-1] if settings else lines
    prompt = [line for line in body if not line.startswith("Negative prompt: ")]
    negative = [line.removeprefix("Negative prompt: ") for line in body
                if line.startswith("Negative prompt: ")]  # fmt: skip
    fields["Prompt"] = "\n".join(prompt)
    fields["Negative prompt"] = "\n".join(negative)
    for part in settings.split(", "):
        key, sep, value = part.partition(": ")
        if sep:
            fields[key.strip()] = value.strip()
    return fields
