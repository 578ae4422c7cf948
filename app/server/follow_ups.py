"""Follow-ups of a stored job over HTTP, as the window's actions and the command line's
`upscale`, `vary`, `inpaint`, `outpaint` and `edit` make them: `POST /api/v1/jobs/{id}/
hires|upscale|tiled|vary|inpaint|outpaint|edit`. Each builds its jobs with the engine function the
command line calls, so the same bad input is refused in the same sentence; the new jobs
wait for their parent (recorded as such) and carry its priority and attempts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.engine.generation.request_checks import check_runnable, edit_defaults_of
from app.engine.jobs.api_jobs import EASEL_API
from app.engine.jobs.follow_ups import (
    Check,
    FollowUps,
    NewJob,
    Submitted,
    Upscale,
    Variations,
    submit_with_follow_ups,
)
from app.engine.jobs.graph import (
    DEFAULT_UPSCALE,
    DEFAULT_UPSCALE_STRENGTH,
    DEFAULT_VARIATION_STRENGTH,
    DEFAULT_VARIATIONS,
    parents_of,
)
from app.engine.jobs.mask import Extension, Fill
from app.engine.jobs.params import (
    DEFAULT_MASK_BLUR,
    DEFAULT_MASK_PADDING,
    MAX_EDIT_IMAGES,
    MAX_IMAGES,
    RANDOM_SEED,
)
from app.engine.store.edits import EditSettings, edit_job
from app.engine.store.repaint import (
    DEFAULT_INPAINT_STRENGTH,
    MaskSettings,
    Repaint,
    inpaint_job,
    outpaint_job,
)
from app.server.api_v1 import PREFIX, JobId, job_json, state_of
from app.server.idempotency import IdempotencyKey, request_key
from app.server.job_build import image_bytes
from app.server.job_fields import ImageInput
from app.server.requests import SEED_LIMITS, client_name, decode_image, source_for
from app.server.state import ServerState

router = APIRouter(prefix=PREFIX, tags=["follow-ups"])
MAX_SCALE = 8.0  # as A1111's hr_scale
MAX_SIDE_PX = 2048  # an outpaint's extension of one side
NOTHING_FOLLOWS = FollowUps()


def _examples(*examples: dict[str, Any]) -> ConfigDict:
    # A field it does not know is refused, not ignored: it might have changed the image.
    return ConfigDict(extra="forbid", json_schema_extra={"examples": list(examples)})


class HiresFollowUp(BaseModel):
    """Hires fix: the image resized by `scale`, then redrawn by img2img at `strength`."""

    model_config = _examples({"scale": 2.0, "strength": 0.35})
    scale: float = Field(DEFAULT_UPSCALE, gt=0, le=MAX_SCALE)
    strength: float = Field(DEFAULT_UPSCALE_STRENGTH, description="share of the schedule redrawn")
    upscaler: str = Field("", max_length=200, description="an upscaler model; empty: Lanczos")
    steps: int = Field(0, ge=0, le=1000, description="the img2img pass's steps; 0: the job's")


class UpscaleFollowUp(BaseModel):
    """A real upscaler alone (ESRGAN, SwinIR, HAT, ...): no img2img pass after it."""

    model_config = _examples({"upscaler": "RealESRGAN_x4plus", "scale": 2.0})
    upscaler: str = Field(min_length=1, max_length=200, description="GET /sdapi/v1/upscalers")
    scale: float = Field(DEFAULT_UPSCALE, gt=0, le=MAX_SCALE)


class TiledFollowUp(BaseModel):
    """Ultimate SD Upscale: enlarge, then img2img region by region with a seam fix."""

    model_config = _examples({"scale": 2.0, "strength": 0.35, "upscaler": ""})
    scale: float = Field(DEFAULT_UPSCALE, gt=0, le=MAX_SCALE)
    strength: float = Field(DEFAULT_UPSCALE_STRENGTH, description="share of the schedule redrawn")
    upscaler: str = Field("", max_length=200, description="an upscaler model; empty: Lanczos")


class VaryFollowUp(BaseModel):
    """Variations: img2img children of the image at low strength, each its own seed."""

    model_config = _examples({"count": 4, "strength": 0.3})
    count: int = Field(DEFAULT_VARIATIONS, ge=1, le=MAX_IMAGES)
    strength: float = Field(DEFAULT_VARIATION_STRENGTH, description="share of the schedule redrawn")


class InpaintFollowUp(BaseModel):
    """A repaint of the image where the mask is white."""

    model_config = _examples({"mask": "iVBORw0KGgo...", "prompt": "a blue square"})
    mask: str = Field(description="a base64 PNG or JPEG, the image's size; white repaints")
    prompt: str = Field("", max_length=20_000, description="default: the job's prompt")
    strength: float = Field(DEFAULT_INPAINT_STRENGTH, description="share of the schedule redrawn")
    seed: int = Field(RANDOM_SEED, json_schema_extra=SEED_LIMITS)
    mask_blur: int = Field(DEFAULT_MASK_BLUR, description="the mask's blur, pixels")
    only_masked: bool = Field(False, description="draw only the mask's box, paste it back")
    padding: int = Field(DEFAULT_MASK_PADDING, description="with only_masked: around the box")
    model: str = Field(
        "", max_length=200, description="the model that paints it; default: the job's"
    )
    cfg: float | None = Field(None, description="its cfg; default: the job's (Flux.1 Fill: 30)")


class OutpaintFollowUp(BaseModel):
    """An extension of the finished image: the new area filled, then painted."""

    model_config = _examples({"right": 64, "fill": "edge", "prompt": "more sky"})
    left: int = Field(0, ge=0, le=MAX_SIDE_PX)
    right: int = Field(0, ge=0, le=MAX_SIDE_PX)
    top: int = Field(0, ge=0, le=MAX_SIDE_PX)
    bottom: int = Field(0, ge=0, le=MAX_SIDE_PX)
    fill: Fill = Field(Fill.EDGE, description="the new area's start: edge colours, or noise")
    prompt: str = Field("", max_length=20_000, description="default: the job's prompt")
    seed: int = Field(RANDOM_SEED, json_schema_extra=SEED_LIMITS)
    mask_blur: int = Field(DEFAULT_MASK_BLUR, description="the new area's mask blur, pixels")
    model: str = Field(
        "", max_length=200, description="the model that paints it; default: the job's"
    )
    cfg: float | None = Field(None, description="its cfg; default: the job's (Flux.1 Fill: 30)")


class EditFollowUp(BaseModel):
    """Edit with words: the image changed as the instruction says, on a model that edits
    (Flux.1 Kontext), at the image's size."""

    model_config = _examples({"prompt": "make it night", "model": "flux1-kontext-dev"})
    prompt: str = Field(min_length=1, max_length=20_000, description="the instruction")
    model: str = Field("", max_length=200, description="a model that edits; default: the job's")
    steps: int | None = Field(
        None, ge=1, le=1000,
        description="default: the model's own for an edit (Flux.1 Kontext 28, Qwen-Image-Edit 50)",
    )  # fmt: skip
    cfg: float | None = Field(
        None, description="guidance; default: the model's own (Kontext 3.5, Qwen-Image-Edit 4)"
    )
    seed: int = Field(RANDOM_SEED, json_schema_extra=SEED_LIMITS)
    images: list[ImageInput] = Field(
        default_factory=list, max_length=MAX_EDIT_IMAGES - 1,
        description="further input images after the job's picture, in order, for a model "
        "that reads several (Qwen-Image-Edit Plus)",
    )  # fmt: skip


FOLLOW_UP_ANSWER: dict[int | str, dict[str, Any]] = {
    201: {
        "description": "The new jobs, waiting for their parent",
        "content": {"application/json": {"example": {
            "ids": [13], "parent": 12, "replayed": False,
            "jobs": [{"id": 13, "status": "BLOCKED", "parents": [12]}],
        }}},
    },
    200: {"description": "The same Idempotency-Key again: the first request's jobs"},
}  # fmt: skip


def _check(state: ServerState) -> Check:
    """What a worker would refuse, refused now (model names only, as every API request)."""
    search = state.settings.model_search_path()
    return lambda params: check_runnable(params, search, names_only=True)


def _submitted(
    request: Request,
    response: Response,
    job_id: int,
    what: str,
    body: BaseModel,
    key: str | None,
    job: NewJob | None = None,
    follow_ups: FollowUps = NOTHING_FOLLOWS,
) -> dict[str, Any]:
    """`job` (an inpaint, an outpaint: built and checked already), else the `follow_ups`
    of stored job `job_id`, once per Idempotency-Key; the answer names the new jobs."""
    state = state_of(request)
    client = client_name(request)
    submitted = submit_with_follow_ups(
        state.queue, job_id if job is None else job, follow_ups, source=source_for(client),
        check=_check(state) if job is None else None,
        key=request_key(state, key, f"{PREFIX}/jobs/{job_id}/{what}", body),
        with_jobs=state.records.hook(EASEL_API, client, None),
    )  # fmt: skip
    return _answer(state, response, job_id, submitted)


def _answer(
    state: ServerState, response: Response, parent: int, submitted: Submitted
) -> dict[str, Any]:
    ids = list(submitted.all)
    response.status_code = 200 if submitted.replayed else 201
    if ids:
        response.headers["Location"] = f"{PREFIX}/jobs/{ids[0]}"
    jobs = [
        {**job_json(state, state.queue.get(new_id)), "parents": parents_of(state.queue, new_id)}
        for new_id in ids
    ]
    return {"ids": ids, "parent": parent, "replayed": submitted.replayed, "jobs": jobs}


@router.post("/jobs/{job_id}/hires", status_code=201, responses=FOLLOW_UP_ANSWER)
def hires(
    job_id: JobId, body: HiresFollowUp, request: Request, response: Response,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:  # fmt: skip
    """Hires fix of the job's image (`python -m app upscale ID`): it waits for the job."""
    upscale = Upscale(body.scale, body.strength, body.upscaler.strip(), steps=body.steps)
    follow_ups = FollowUps(upscale=upscale)
    return _submitted(
        request, response, job_id, "hires", body, idempotency_key, follow_ups=follow_ups
    )


@router.post("/jobs/{job_id}/upscale", status_code=201, responses=FOLLOW_UP_ANSWER)
def upscale(
    job_id: JobId, body: UpscaleFollowUp, request: Request, response: Response,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:  # fmt: skip
    """The job's image through an upscaler model alone (`upscale ID --upscaler NAME
    --model-only`)."""
    upscale = Upscale(body.scale, 1.0, body.upscaler.strip(), img2img=False)
    follow_ups = FollowUps(upscale=upscale)
    return _submitted(
        request, response, job_id, "upscale", body, idempotency_key, follow_ups=follow_ups
    )


@router.post("/jobs/{job_id}/tiled", status_code=201, responses=FOLLOW_UP_ANSWER)
def tiled(
    job_id: JobId, body: TiledFollowUp, request: Request, response: Response,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:  # fmt: skip
    """A tiled upscale of the job's image (`upscale ID --tiled`), for big results."""
    upscale = Upscale(body.scale, body.strength, body.upscaler.strip(), tiled=True)
    follow_ups = FollowUps(upscale=upscale)
    return _submitted(
        request, response, job_id, "tiled", body, idempotency_key, follow_ups=follow_ups
    )


@router.post("/jobs/{job_id}/vary", status_code=201, responses=FOLLOW_UP_ANSWER)
def vary(
    job_id: JobId, body: VaryFollowUp, request: Request, response: Response,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:  # fmt: skip
    """Variations of the job's image (`vary ID --count N`), in one transaction."""
    follow_ups = FollowUps(variations=Variations(body.count, body.strength))
    return _submitted(
        request, response, job_id, "vary", body, idempotency_key, follow_ups=follow_ups
    )


@router.post("/jobs/{job_id}/inpaint", status_code=201, responses=FOLLOW_UP_ANSWER)
def inpaint(
    job_id: JobId, body: InpaintFollowUp, request: Request, response: Response,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:  # fmt: skip
    """A repaint of part of the job's image (`inpaint ID --mask M.png`): it waits for the
    job when it has not finished yet."""
    state = state_of(request)
    settings = MaskSettings(body.mask_blur, body.only_masked, body.padding)
    job = inpaint_job(
        state.queue, job_id, decode_image(body.mask, "mask"),
        repaint=_repaint(body), strength=body.strength, settings=settings,
        check=_check(state), max_attempts=state.settings.max_attempts,
    )  # fmt: skip
    return _submitted(request, response, job_id, "inpaint", body, idempotency_key, job)


@router.post("/jobs/{job_id}/outpaint", status_code=201, responses=FOLLOW_UP_ANSWER)
def outpaint(
    job_id: JobId, body: OutpaintFollowUp, request: Request, response: Response,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:  # fmt: skip
    """An extension of the job's finished image (`outpaint ID --right 64`)."""
    state = state_of(request)
    extension = Extension(body.left, body.right, body.top, body.bottom)
    job = outpaint_job(
        state.queue, job_id, extension, fill=body.fill, repaint=_repaint(body),
        mask_blur=body.mask_blur, outputs_dir=state.settings.outputs_path(), check=_check(state),
        max_attempts=state.settings.max_attempts,
    )  # fmt: skip
    return _submitted(request, response, job_id, "outpaint", body, idempotency_key, job)


def _repaint(body: InpaintFollowUp | OutpaintFollowUp) -> Repaint:
    """What an inpaint or outpaint paints with: its prompt and seed, and (else the job's)
    model and cfg."""
    return Repaint(body.prompt, body.seed, body.model.strip(), body.cfg)


@router.post("/jobs/{job_id}/edit", status_code=201, responses=FOLLOW_UP_ANSWER)
def edit(
    job_id: JobId, body: EditFollowUp, request: Request, response: Response,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:  # fmt: skip
    """An edit of the job's image from an instruction (`python -m app edit ID "make it
    night"`): a child of the job, waiting for it when it has not finished yet."""
    state = state_of(request)
    more = [image_bytes(state, image, f"input image {n}") for n, image in enumerate(body.images, 2)]
    settings = EditSettings(
        body.prompt, body.model.strip(), body.steps, body.cfg, body.seed, more_images=more
    )
    search = state.settings.model_search_path()
    job = edit_job(
        state.queue, job_id, settings, check=_check(state),
        defaults=edit_defaults_of(search, names_only=True),
        max_attempts=state.settings.max_attempts,
    )  # fmt: skip
    return _submitted(request, response, job_id, "edit", body, idempotency_key, job)
