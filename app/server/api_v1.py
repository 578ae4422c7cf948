"""Easel's own API, `/api/v1`: jobs in and out, their timelines, images and the queue.

Handlers are plain functions: FastAPI runs them on its thread pool, where the queue's
blocking calls belong. Requests the transition table refuses answer 409 with its reason;
repeated cancels and pauses are harmless (ALREADY_SATISFIED: `changed` is false)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi import Path as PathParameter
from pydantic import BaseModel, ConfigDict, Field

from app.engine.history.eta import job_estimate, queue_estimate
from app.engine.history.favourites import star
from app.engine.history.search import JobFilter, search
from app.engine.jobs.api_jobs import EASEL_API, ApiRecord
from app.engine.jobs.params import (
    DEFAULT_FPS,
    DEFAULT_MODEL,
    DEFAULT_SCHEDULER,
    KIND_VIDEO,
    MAX_FPS,
    MAX_FRAMES,
    MAX_IMAGES,
    GenerationParams,
)
from app.engine.jobs.queue import (
    MAX_JOB_ID,
    Job,
    JobNote,
    JobQueue,
    JobTransition,
    TransitionRecord,
)
from app.engine.jobs.states import JobStatus
from app.engine.outputs.registry import all_output_kinds, output_of_job
from app.engine.store.stored_files import output_bytes
from app.engine.workers.roster import list_workers
from app.server.callback_targets import shown_url
from app.server.events import router as events_router
from app.server.requests import (
    CFG_LIMITS,
    KEY_LIMITS,
    PROMPT_LIMITS,
    SCHEDULER_LIMITS,
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
from app.server.state import ServerState

PREFIX = "/api/v1"
router = APIRouter(prefix=PREFIX, tags=["easel"])
# Ids beyond the database's range are refused by validation (422, one sentence), before
# any query: SQLite cannot bind an integer past 2^63 (OverflowError, a 500 before).
JobId = Annotated[int, PathParameter(ge=1, le=MAX_JOB_ID, description="a job's id")]
router.include_router(events_router)
MAX_PAGE = 500
RUNNING = [status for status in JobStatus if status.is_running]


def state_of(request: Request) -> ServerState:
    state: ServerState = request.app.state.easel
    return state


class SubmitBody(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"prompt": "a red circle", "width": 64, "height": 64}]}
    )

    prompt: str = Field(max_length=20_000, json_schema_extra=PROMPT_LIMITS)
    negative_prompt: str = Field("", max_length=20_000, json_schema_extra=TEXT_LIMITS)
    model: str = DEFAULT_MODEL
    scheduler: str = Field(DEFAULT_SCHEDULER, json_schema_extra=SCHEDULER_LIMITS)
    steps: int = Field(GenerationParams.steps, json_schema_extra=STEPS_LIMITS)
    cfg: float = Field(GenerationParams.cfg, json_schema_extra=CFG_LIMITS)
    width: int | None = Field(
        None, description="default: the init image's, else 64", json_schema_extra=SIDE_LIMITS
    )
    height: int | None = Field(
        None, description="default: the init image's, else 64", json_schema_extra=SIDE_LIMITS
    )
    seed: int = Field(GenerationParams.seed, json_schema_extra=SEED_LIMITS)
    count: int = Field(1, ge=1, le=MAX_IMAGES, description="jobs to make (a seed batch)")
    parents: list[Annotated[int, Field(ge=1, le=MAX_JOB_ID)]] = Field(
        default_factory=list, max_length=64
    )
    init_image: str | None = Field(None, description="img2img: a base64 PNG or JPEG")
    strength: float = Field(0.75, description="img2img: share of the schedule redrawn")
    priority: int = Field(0, ge=-1_000_000, le=1_000_000)
    max_attempts: int | None = Field(None, ge=1, le=20)
    callback_url: str | None = Field(None, description="POSTed the job's final status")
    frames: int | None = Field(
        None, ge=1, le=MAX_FRAMES,
        description="a video (an MP4) of this many frames, on a video model (Wan: 4k+1)",
    )  # fmt: skip
    fps: int = Field(DEFAULT_FPS, ge=1, le=MAX_FPS, description="a video's frames a second")


class StarBody(BaseModel):
    starred: bool = True


@router.post("/jobs", status_code=201)
def submit_job(
    body: SubmitBody,
    request: Request,
    response: Response,
    idempotency_key: Annotated[str | None, Header(json_schema_extra=KEY_LIMITS)] = None,
) -> dict[str, Any]:
    """Queue a job (or `count` of them). Send `Idempotency-Key` to make a retried request
    safe: the same key answers with the first request's jobs (200), never new ones."""
    state = state_of(request)
    init = decode_image(body.init_image) if body.init_image is not None else None
    params = GenerationParams(
        prompt=body.prompt, negative_prompt=body.negative_prompt, model=body.model,
        scheduler=body.scheduler, steps=body.steps, cfg=body.cfg,
        width=body.width or GenerationParams.width, height=body.height or GenerationParams.height,
        seed=body.seed, strength=body.strength if init else 1.0,
    )  # fmt: skip
    if body.frames is not None:  # a clip: checked as one at submit (frames, model)
        params = replace(params, kind=KIND_VIDEO, frames=body.frames, fps=body.fps)
    sized = body.width is not None or body.height is not None
    job = JobRequest(
        params, count=body.count, parents=body.parents, init_image=init, init_sized=sized,
        priority=body.priority, max_attempts=body.max_attempts, callback_url=body.callback_url,
    )  # fmt: skip
    submitted = submit(
        state, job, api=EASEL_API, client=client_name(request), key=idempotency_key
    )  # fmt: skip
    if submitted.replayed:
        response.status_code = 200
    response.headers["Location"] = f"{PREFIX}/jobs/{submitted.jobs[0]}"
    jobs = [job_json(state, state.queue.get(job_id)) for job_id in submitted.jobs]
    return {"ids": list(submitted.jobs), "replayed": submitted.replayed, "jobs": jobs}


@router.get("/jobs/{job_id}")
def get_job(job_id: JobId, request: Request) -> dict[str, Any]:
    """A job: status, progress, ETA, error, its whole timeline and links to its image."""
    state = state_of(request)
    job, timeline, record = state.records.job_view(job_id)
    return job_json(state, job, timeline=timeline, record=record)


@router.get("/jobs")
def list_jobs(
    request: Request,
    status: Annotated[list[JobStatus] | None, Query()] = None,
    q: Annotated[str, Query(max_length=500, description="words in the prompt")] = "",
    model: str | None = None,
    starred: bool | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    before: Annotated[
        int | None, Query(ge=1, le=MAX_JOB_ID + 1, description="page on: the last id seen")
    ] = None,
) -> dict[str, Any]:
    """Jobs newest first, filtered like the window's history search."""
    state = state_of(request)
    job_filter = JobFilter(text=q, statuses=frozenset(status or ()), model=model,
                           starred=starred)  # fmt: skip
    if job_filter.is_everything:
        jobs = state.queue.jobs(None, limit=limit, before_id=before)
    else:
        jobs = _searched(state.queue, job_filter, limit, before)
    next_before = jobs[-1].id if len(jobs) == limit else None
    return {"jobs": [job_json(state, job) for job in jobs], "next_before": next_before}


def _searched(queue: JobQueue, job_filter: JobFilter, limit: int, before: int | None) -> list[Job]:
    if before is None:
        return search(queue, job_filter, limit=limit)
    found = search(queue, job_filter, limit=None)  # a search pages by id on the result
    return [job for job in found if (job.id or 0) < before][:limit]


def _request(name: str) -> Any:
    def act(job_id: JobId, request: Request) -> dict[str, Any]:
        state = state_of(request)
        source = source_for(client_name(request))
        action = getattr(state.queue, name)
        record: TransitionRecord = action(job_id, source=source)
        return {"changed": record.changed, "job": job_json(state, state.queue.get(job_id))}

    act.__name__ = f"{name}_job"
    act.__doc__ = (
        f"{name.capitalize()} the job through the transition table: 409 with the reason "
        "when the table refuses; a request already satisfied changes nothing (changed: false)."
    )
    return act


for _name in ("cancel", "pause", "resume", "retry"):
    router.add_api_route(f"/jobs/{{job_id}}/{_name}", _request(_name), methods=["POST"])


@router.post("/jobs/{job_id}/star")
def star_job(job_id: JobId, request: Request, body: StarBody | None = None) -> dict[str, Any]:
    """Star (or with `{"starred": false}` unstar) a job: never pruned."""
    state = state_of(request)
    star(state.queue, job_id, on=True if body is None else body.starred)
    return job_json(state, state.queue.get(job_id))


# The path keeps its name for the clients that use it; what it serves is the job's kind of
# output, with that kind's media type.
OUTPUT_MEDIA: dict[int | str, dict[str, Any]] = {
    200: {"content": {kind.media_type: {} for kind in all_output_kinds()}}
}


@router.get("/jobs/{job_id}/image", response_class=Response, responses=OUTPUT_MEDIA)
def job_image(job_id: JobId, request: Request) -> Response:
    """The finished output as its file (an image: the PNG, with its `parameters` (A1111)
    and `easel` text chunks), sent as its kind's media type."""
    state = state_of(request)
    job = state.queue.get(job_id)
    kind = output_of_job(job.kind)
    data = output_bytes(state.queue.db, job) if job.status == JobStatus.SUCCESS else None
    if data is None:
        from fastapi import HTTPException

        raise HTTPException(404, f"Job {job_id} has no {kind.name} ({job.status})")
    return Response(data, media_type=kind.media_type)


@router.get("/jobs/{job_id}/preview", response_class=Response,
            responses={200: {"content": {"image/png": {}}}})  # fmt: skip
def job_preview(job_id: JobId, request: Request) -> Response:
    """The newest preview of a running job (one this server's workers run)."""
    state = state_of(request)
    state.queue.get(job_id)  # 404 for an unknown job
    data = state.preview(job_id)
    if data is None:
        from fastapi import HTTPException

        raise HTTPException(404, f"Job {job_id} has no preview here")
    return Response(data, media_type="image/png", headers={"Cache-Control": "no-store"})


@router.get("/models")
def models(request: Request) -> list[dict[str, Any]]:
    return [
        {
            "name": m.name,
            "source": m.source.value,
            "architecture": str(m.architecture or ""),
            "supported": m.supported,
            "why_not": m.unsupported_reason,
        }
        for m in state_of(request).models()
    ]


@router.get("/loras")
def loras(request: Request) -> list[dict[str, Any]]:
    from app.engine.generation.prompts.loras import installed_loras

    search_path = state_of(request).settings.model_search_path()
    return [{"name": name, "prompt": f"<lora:{name}:1>"}
            for name in installed_loras(search_path)]  # fmt: skip


@router.get("/queue")
def queue_stats(request: Request) -> dict[str, Any]:
    """Jobs by status, the time the queued and running ones need (learned run times over
    the live workers; null before any job finished) and the workers of every machine."""
    state = state_of(request)
    counts = state.queue.count_by_status()
    workers = list_workers(state.queue, timeout_s=state.settings.heartbeat_timeout_s)
    waiting = state.queue.jobs([JobStatus.PENDING, *RUNNING], limit=MAX_PAGE)
    live = sum(1 for w in workers if not w.state.is_gone)
    estimate = queue_estimate(state.estimator(), waiting, workers=max(1, live))
    return {
        "counts": {status.value: counts.get(status, 0) for status in JobStatus},
        "eta_s": None if estimate.seconds is None else round(estimate.seconds, 1),
        "workers": [
            {
                "id": w.worker_id,
                "machine": w.machine,
                "state": w.state.value,
                "job": w.current_job,
                "device": w.device,
                "model": w.model,
            }
            for w in workers
        ],
    }


def job_json(
    state: ServerState,
    job: Job,
    *,
    timeline: Sequence[JobTransition | JobNote] | None = None,
    record: ApiRecord | None = None,
) -> dict[str, Any]:
    status = JobStatus(job.status)
    eta = None
    if status is JobStatus.PENDING or status.is_running:
        eta = job_estimate(state.estimator(), job)
    base = f"{PREFIX}/jobs/{job.id}"
    out: dict[str, Any] = {
        "id": job.id, "status": job.status, "terminal": status.is_terminal,
        "prompt": job.prompt, "negative_prompt": job.negative_prompt, "model": job.model,
        "scheduler": job.scheduler, "steps": job.steps, "cfg": job.cfg, "width": job.width,
        "height": job.height, "seed": job.seed, "strength": job.strength,
        "init_image": job.init_image, "priority": job.priority, "attempt": job.attempt,
        "max_attempts": job.max_attempts, "given_up": job.given_up, "starred": job.starred,
        "progress": {"step": job.progress_step, "total": job.progress_total,
                     "live_step": state.live_step(job.id or 0)},
        "eta_s": None if eta is None else round(eta, 2),
        "error": state.redact(job.error) if job.error else job.error,
        "rerun_of": job.rerun_of, "created_at": job.created_at, "started_at": job.started_at,
        "finished_at": job.finished_at,
        "links": {"self": base, "image": f"{base}/image" if status is JobStatus.SUCCESS else None,
                  "preview": f"{base}/preview", "events": f"{PREFIX}/events?job={job.id}"},
    }  # fmt: skip
    if job.kind == KIND_VIDEO:  # its output (links.image) is an MP4 of these frames
        out["video"] = {"frames": job.frames, "fps": job.fps}
    if timeline is not None:
        out["timeline"] = [_redacted(state, timeline_json(row)) for row in timeline]
    if record is not None:
        out["client"] = {"api": record.api, "name": record.client}
        if record.callback_url:
            out["callback"] = {"url": shown_url(record.callback_url),
                               "attempts": record.callback_attempts,
                               "done_at": record.callback_done_at,
                               "result": record.callback_result}  # fmt: skip
    return out


def _redacted(state: ServerState, row: dict[str, Any]) -> dict[str, Any]:
    """A timeline row with no server folder in its message (a failure's may name one)."""
    if row.get("message"):
        row["message"] = state.redact(row["message"])
    return row


def timeline_json(row: JobTransition | JobNote) -> dict[str, Any]:
    """A timeline row: a transition (`"kind": "transition"`), or a note about the job that
    changed no status (`"kind": "note"`: each callback try, `jobs.notes`)."""
    if isinstance(row, JobNote):
        return {"kind": "note", "id": row.id, "job_id": row.job_id, "attempt": row.attempt,
                "source": row.source, "message": row.message, "at": row.at}  # fmt: skip
    return transition_json(row)


def transition_json(t: JobTransition) -> dict[str, Any]:
    return {"kind": "transition", "id": t.id, "job_id": t.job_id, "attempt": t.attempt,
            "from": t.from_status, "to": t.to_status, "event": t.event, "source": t.source,
            "message": t.message, "at": t.at}  # fmt: skip
