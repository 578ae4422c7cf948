"""A1111's lists and its Extras tab, as its clients ask for them: `upscalers`,
`extra-single-image` (an upscale, as an Easel upscale job when a model does it),
`refresh-checkpoints`, `sd-vae` and `memory`."""

from __future__ import annotations

import base64
import io
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from app.engine.jobs.params import KIND_UPSCALE, MAX_UPSCALED_SIZE, SIZE_MULTIPLE, GenerationParams
from app.engine.jobs.states import JobStatus
from app.engine.store.stored_files import output_bytes
from app.server.a1111_fields import UnsupportedRequest
from app.server.requests import JobRequest, decode_image
from app.server.state import ServerState

router = APIRouter(prefix="/sdapi/v1", tags=["automatic1111"])

# A1111's upscalers that are a plain resize: its "None" upscaler does nothing and the image
# is then resized with Lanczos, as Easel's Lanczos does.
LANCZOS_UPSCALERS = ("None", "Lanczos")
EXTRAS_PROMPT = "extras: upscale"  # an upscale job's prompt (one is required; none is read)


def state_of(request: Request) -> ServerState:
    state: ServerState = request.app.state.easel
    return state


@router.get("/upscalers")
def upscalers(request: Request) -> list[dict[str, Any]]:
    """Lanczos, and the upscaler models in each models folder's upscale_models/ (no paths:
    no endpoint gives out a file's place)."""
    from app.engine.generation.post.upscalers import available_upscalers, upscaler_folders

    names = available_upscalers(upscaler_folders(state_of(request).settings.model_search_path()))
    return [
        {"name": name, "model_name": None if name in LANCZOS_UPSCALERS else name,
         "model_path": None, "model_url": None, "scale": 4 if name == "None" else None}
        for name in (*LANCZOS_UPSCALERS, *sorted(names))
    ]  # fmt: skip


@router.post("/refresh-checkpoints")
def refresh_checkpoints(request: Request) -> None:
    """The models are read again now (as /sdapi/v1/sd-models would in a few seconds)."""
    state_of(request).forget_models()


@router.get("/sd-vae")
def sd_vae() -> list[dict[str, Any]]:
    """None: each Easel model brings its own VAE (A1111's "Automatic")."""
    return []


@router.get("/memory")
def memory() -> dict[str, Any]:
    """This server's memory; its GPU is the workers' (the serving process never loads torch),
    so `cuda` says where to look, as A1111 does when it has none to show."""
    import psutil

    ram = psutil.virtual_memory()
    return {
        "ram": {"free": ram.available, "used": ram.total - ram.available, "total": ram.total},
        "cuda": {"error": "the server process holds no GPU: GET /api/v1/queue for the workers"},
    }


class ExtrasSingleImage(BaseModel):
    """A1111's ExtrasSingleImageRequest: every field, refused when it asks for what Easel
    does not do (face restoration, a second upscaler, cropping)."""

    model_config = ConfigDict(extra="forbid")

    image: str = ""
    resize_mode: Literal[0, 1] = 0
    show_extras_results: bool = True
    gfpgan_visibility: float = Field(0, ge=0, le=1)
    codeformer_visibility: float = Field(0, ge=0, le=1)
    codeformer_weight: float = Field(0, ge=0, le=1)
    upscaling_resize: float = Field(2, gt=0, le=8)
    upscaling_resize_w: int = Field(512, ge=1, le=MAX_UPSCALED_SIZE)
    upscaling_resize_h: int = Field(512, ge=1, le=MAX_UPSCALED_SIZE)
    upscaling_crop: bool = True
    upscaler_1: str = "None"
    upscaler_2: str = "None"
    extras_upscaler_2_visibility: float = Field(0, ge=0, le=1)
    upscale_first: bool = False


@router.post("/extra-single-image")
async def extra_single_image(body: ExtrasSingleImage, request: Request) -> dict[str, Any]:
    from app.engine.jobs.init_image import fit_to, open_rgb
    from app.server.a1111 import submit_and_wait

    if body.gfpgan_visibility or body.codeformer_visibility:
        raise UnsupportedRequest("Easel does not restore faces (GFPGAN, CodeFormer)")
    if body.upscaler_2 != "None" and body.extras_upscaler_2_visibility:
        raise UnsupportedRequest("Easel upscales with one upscaler, not a blend of two")
    data = decode_image(body.image, "image")
    # Decoding and resizing take CPU time: on a thread, so other requests are not held.
    source = await run_in_threadpool(open_rgb, data)
    size = extras_size(body, source.size)
    if body.upscaler_1 in LANCZOS_UPSCALERS:  # a resize: no job, no model
        resized = await run_in_threadpool(lambda: _png(fit_to(source, size)))
        return _extras_answer(body, resized)
    state = state_of(request)
    params = GenerationParams(
        EXTRAS_PROMPT, model=state.sd_model, kind=KIND_UPSCALE, upscaler=body.upscaler_1,
        width=size[0], height=size[1], strength=1.0,
    )  # fmt: skip
    [job] = await submit_and_wait(request, state, JobRequest(params, init_image=data))
    png = await run_in_threadpool(output_bytes, state.queue.db, job)
    if job.status != JobStatus.SUCCESS or png is None:
        raise HTTPException(500, f"Job {job.id} {job.status}: {job.error or 'no image'}")
    return _extras_answer(body, png)


def extras_size(body: ExtrasSingleImage, size: tuple[int, int]) -> tuple[int, int]:
    """The upscaled size: by `upscaling_resize`, or to `upscaling_resize_w/h` when it keeps
    the aspect ratio (A1111 would crop or stretch; Easel refuses rather than guess)."""
    width, height = size
    if body.resize_mode == 0:
        scale = body.upscaling_resize
    else:
        scale = body.upscaling_resize_w / width
        if round(height * scale) != body.upscaling_resize_h:
            raise UnsupportedRequest(
                f"upscaling_resize_w x upscaling_resize_h ({body.upscaling_resize_w}x"
                f"{body.upscaling_resize_h}) must keep the image's aspect ratio ({width}x{height})"
            )
    target = (_side(width * scale), _side(height * scale))
    if max(target) > MAX_UPSCALED_SIZE:
        raise UnsupportedRequest(f"the upscaled image would be larger than {MAX_UPSCALED_SIZE}")
    return target


def _side(value: float) -> int:
    return max(SIZE_MULTIPLE, round(value / SIZE_MULTIPLE) * SIZE_MULTIPLE)


def _png(image: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _extras_answer(body: ExtrasSingleImage, png: bytes) -> dict[str, Any]:
    shown = base64.b64encode(png).decode("ascii") if body.show_extras_results else None
    return {"html_info": "", "image": shown}
