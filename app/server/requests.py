"""Turning an HTTP request into jobs: the same checks and the same one transaction as the
window and the command line (`submit_with_follow_ups`), plus who asked and its key."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from fastapi import Request
from pydantic.json_schema import JsonDict

from app.engine.generation.request_checks import check_runnable
from app.engine.jobs.api_jobs import EASEL_API
from app.engine.jobs.follow_ups import FollowUps, NewJob, Submitted, submit_with_follow_ups
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.init_image import InvalidInitImage, fit_to, open_rgb, prepare_init_image
from app.engine.jobs.mask import open_mask, png_bytes, prepare_mask
from app.engine.jobs.params import (
    KIND_TILED,
    KIND_UPSCALE,
    MAX_CFG,
    MAX_SEED,
    MAX_SIZE,
    MAX_STEPS,
    MIN_CFG,
    MIN_SIZE,
    MIN_STEPS,
    RANDOM_SEED,
    SCHEDULERS,
    SIZE_MULTIPLE,
    GenerationParams,
)
from app.engine.jobs.request_keys import MAX_KEY_CHARS, RequestKey, fingerprint_of
from app.engine.jobs.run_inputs import RunInputs
from app.server.callback_targets import check_callback_url
from app.server.state import ServerState

SOURCE = "api"
A1111_SOURCE = "sdapi"
CLIENT_HEADER = "x-easel-client"
KEY_HEADER = "idempotency-key"
_CLIENT_CHARS = re.compile(r"[^A-Za-z0-9._/+-]")
MAX_CLIENT_CHARS = 40

# The limits `GenerationParams` checks, published in the OpenAPI schema (`json_schema_extra`)
# so that clients, and the fuzzer's requests that fit the schema, know them. Only published:
# a pydantic constraint would refuse in pydantic's words, not in the sentence every other
# way of submitting answers with.
PROMPT_LIMITS: JsonDict = {"pattern": "^[^\\x00]*[^\\x00\\s][^\\x00]*$"}  # some text, no NUL
TEXT_LIMITS: JsonDict = {"pattern": "^[^\\x00]*$"}
STEPS_LIMITS: JsonDict = {"minimum": MIN_STEPS, "maximum": MAX_STEPS}
CFG_LIMITS: JsonDict = {"minimum": MIN_CFG, "maximum": MAX_CFG}
SIDE_LIMITS: JsonDict = {"minimum": MIN_SIZE, "maximum": MAX_SIZE, "multipleOf": SIZE_MULTIPLE}
SEED_LIMITS: JsonDict = {"minimum": RANDOM_SEED, "maximum": MAX_SEED}  # -1: a random one
SCHEDULER_LIMITS: JsonDict = {"enum": list(SCHEDULERS)}
KEY_LIMITS: JsonDict = {"minLength": 1, "maxLength": MAX_KEY_CHARS, "pattern": "^[ -~]+$"}


def client_name(request: Request) -> str:
    """The client's name: `X-Easel-Client`, else the User-Agent's first word; "" if none."""
    given = request.headers.get(CLIENT_HEADER) or request.headers.get("user-agent", "")
    first = given.strip().split(" ")[0] if given.strip() else ""
    return _CLIENT_CHARS.sub("", first)[:MAX_CLIENT_CHARS]


def source_for(client: str, api: str = EASEL_API) -> str:
    """The timeline's source, naming the door: `api` (Easel's own API) or `sdapi` (the
    A1111 API), then `:<client>` when the client names itself (`cli` and the window's
    own are the other doors' sources)."""
    door = SOURCE if api == EASEL_API else A1111_SOURCE
    return f"{door}:{client}" if client else door


def decode_image(data: str, what: str = "init image") -> bytes:
    """A base64 image (a `data:image/png;base64,` prefix allowed), or `InvalidInitImage`."""
    text = data.strip()
    if text.startswith("data:"):
        text = text.partition(",")[2]
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInitImage(f"the {what} is not valid base64") from None


NO_FOLLOW_UPS = FollowUps()


@dataclass(frozen=True)
class JobRequest:
    params: GenerationParams
    count: int = 1
    parents: Sequence[int] = ()
    init_image: bytes | None = None
    init_sized: bool = True  # the request gave the size; else the init image gives it
    mask: bytes | None = None  # inpaint: white repaints; fitted to the init image here
    control_pngs: Sequence[bytes] = ()  # each control layer's image (`params.control`)
    reference_pngs: Sequence[bytes] = ()  # each reference image (`params.reference`)
    edit_pngs: Sequence[bytes] = ()  # an edit's further input images (`params.edit_images`)
    last_image: bytes | None = None  # a clip's last frame (first-and-last-frame models)
    follow_ups: FollowUps = NO_FOLLOW_UPS  # what follows each job (a hires fix's upscale)
    priority: int = 0
    max_attempts: int | None = None
    callback_url: str | None = None


def submit(
    state: ServerState,
    job: JobRequest,
    *,
    api: str,
    client: str,
    key: str | None,
    fingerprint_extra: object = None,
) -> Submitted:
    """Check `job` as a worker would, then store it (its `count` jobs) in one transaction
    with its record; with `key`, at most once (a replay returns the first jobs)."""
    params, init_png, mask_png = with_images(job)
    params, last_png = with_last_image(params, job.last_image)
    check_callback(state, job.callback_url)
    params = params.validated()  # checked as a worker would by `submit_with_follow_ups`
    request_key = None
    if key is not None:
        content = {"params": params.to_dict(), "count": job.count, "parents": list(job.parents),
                   "init": fingerprint_of(init_png.hex()) if init_png else None,
                   "priority": job.priority, "callback": job.callback_url, "api": api,
                   "extra": fingerprint_extra, "follow_ups": repr(job.follow_ups)}  # fmt: skip
        if last_png is not None:
            content["last"] = fingerprint_of(last_png.hex())
        request_key = keyed(state, key, content)
    new = NewJob(
        params, count=job.count, parents=tuple(job.parents),
        inputs=RunInputs(init_image=init_png, mask=mask_png, control_images=job.control_pngs,
                         reference_images=job.reference_pngs, edit_images=job.edit_pngs,
                         last_image=last_png),
        max_attempts=job.max_attempts or state.settings.max_attempts, priority=job.priority,
    )  # fmt: skip
    return submit_with_follow_ups(
        state.queue, new, job.follow_ups, source=source_for(client, api), check=checker(state),
        key=request_key, with_jobs=state.records.hook(api, client, job.callback_url),
    )  # fmt: skip


def with_last_image(
    params: GenerationParams, data: bytes | None
) -> tuple[GenerationParams, bytes | None]:
    """A clip's last frame as a PNG at the clip's size, named in the settings."""
    if data is None:
        return params, None
    png = prepare_init_image(data, (params.width, params.height)).png
    return replace(params, last_image=digest(png)), png


def with_images(job: JobRequest) -> tuple[GenerationParams, bytes | None, bytes | None]:
    """`job`'s settings naming its init image and mask, and their PNGs: the init image
    converted (and sized) as the command line's, the mask fitted to it."""
    params = job.params
    init_png = mask_png = None
    if job.init_image is not None and keeps_own_size(params, job):
        init_png = prepare_init_image(job.init_image).png
    elif job.init_image is not None:
        size = (params.width, params.height) if job.init_sized else None
        prepared = prepare_init_image(job.init_image, size)
        init_png = prepared.png
        params = replace(params, width=prepared.width, height=prepared.height)
    if init_png is not None:  # named now: what is checked below depends on it
        params = replace(params, init_image=digest(init_png))
    if job.mask is not None:  # on the init image given, or on a job's picture at the job's size
        size = open_rgb(init_png).size if init_png is not None else (params.width, params.height)
        mask_png = fitted_mask(job.mask, size)
        params = replace(params, mask=digest(mask_png))
    return params, init_png, mask_png


def check_callback(state: ServerState, callback_url: str | None) -> None:
    """Refuse a callback URL now rather than have its sender fail, unseen, later."""
    if callback_url is not None:
        settings = state.settings
        check_callback_url(callback_url, allow_private=settings.allow_private_callbacks,
                           timeout_s=settings.callback_deadline_s)  # fmt: skip


def keyed(state: ServerState, key: str, content: object) -> RequestKey:
    """The Idempotency-Key of a request of this `content`, kept as the settings say."""
    keep_s = state.settings.idempotency_key_hours * 3600
    return RequestKey(key, fingerprint_of(content), keep_s=keep_s)


def checker(state: ServerState) -> Callable[[GenerationParams], object]:
    """What a worker would refuse, by name only (a client names no server path)."""
    search = state.settings.model_search_path()
    return lambda params: check_runnable(params, search, names_only=True)


def keeps_own_size(params: GenerationParams, job: JobRequest) -> bool:
    """Whether the init image is stored at its own size, not the job's: an upscale's (the
    job's size is its result's), or an only-masked inpaint's (the whole picture is kept, the
    mask's box is drawn at the job's size and pasted back, as `submit --only-masked` does)."""
    return params.kind in (KIND_UPSCALE, KIND_TILED) or (
        job.mask is not None and params.only_masked
    )


def fitted_mask(data: bytes, size: tuple[int, int]) -> bytes:
    """The mask as a greyscale PNG at the init image's `size` (resized with Lanczos, as the
    init image is), refused when it marks nothing to repaint."""
    mask = open_mask(data)
    return prepare_mask(png_bytes(fit_to(mask, size)) if mask.size != size else data, size)
