"""Easel's own API, `/api/v1`: jobs in and out, their timelines, images and the queue.

Handlers are plain functions: FastAPI runs them on its thread pool, where the queue's
blocking calls belong. Requests the transition table refuses answer 409 with its reason;
repeated cancels and pauses are harmless (ALREADY_SATISFIED: `changed` is false)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi import Path as PathParameter
from pydantic import BaseModel

from app.engine.history.eta import job_estimate, queue_estimate
from app.engine.history.favourites import star
from app.engine.history.search import JobFilter, search
from app.engine.jobs.api_jobs import ApiRecord
from app.engine.jobs.groups import retry_member
from app.engine.jobs.params import (
    KIND_VIDEO,
    decode_control,
    decode_edit_images,
    decode_reference,
    decode_scheduler_config,
)
from app.engine.jobs.queue import (
    MAX_JOB_ID,
    Job,
    JobNote,
    JobQueue,
    JobTransition,
    TransitionRecord,
    params_of,
)
from app.engine.jobs.states import JobStatus
from app.engine.outputs.registry import all_output_kinds, output_of_job
from app.engine.store.stored_files import output_bytes
from app.engine.workers.roster import list_workers
from app.server.callback_targets import shown_url
from app.server.events import router as events_router
from app.server.idempotency import IdempotencyKey, answered_once
from app.server.job_build import submit_body
from app.server.job_fields import JobBody
from app.server.requests import (
    KEY_LIMITS,
    client_name,
    source_for,
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


class StarBody(BaseModel):
    starred: bool = True


@router.post("/jobs", status_code=201)
def submit_job(
    body: JobBody,
    request: Request,
    response: Response,
    idempotency_key: Annotated[str | None, Header(json_schema_extra=KEY_LIMITS)] = None,
) -> dict[str, Any]:
    """Queue a job (or `count` of them), or a group: a batch, a wildcard prompt or an X/Y/Z
    grid (answered with its `group`). Send `Idempotency-Key` to make a retried request
    safe: the same key answers with the first request's jobs (200), never new ones."""
    state = state_of(request)
    made = submit_body(state, body, client=client_name(request), key=idempotency_key)
    if made.replayed:
        response.status_code = 200
    response.headers["Location"] = f"{PREFIX}/jobs/{made.jobs[0]}"
    jobs = [job_json(state, state.queue.get(job_id)) for job_id in made.jobs]
    out: dict[str, Any] = {"ids": list(made.jobs), "replayed": made.replayed, "jobs": jobs}
    if made.group is not None:
        group = made.group
        out["group"] = {"id": group.group_id, "kind": made.group_kind, "cells": list(group.jobs),
                        "composer": group.composer,
                        "links": {"self": f"{PREFIX}/groups/{group.group_id}"}}  # fmt: skip
    return out


@router.get("/jobs/{job_id}")
def get_job(job_id: JobId, request: Request) -> dict[str, Any]:
    """A job: status, progress, ETA, error, its whole timeline and links to its image. An
    edit's further input images (Qwen-Image-Edit Plus) are `edit_images`, in order."""
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
    def act(
        job_id: JobId,
        request: Request,
        idempotency_key: IdempotencyKey = None,
    ) -> dict[str, Any]:
        state = state_of(request)
        source = source_for(client_name(request))
        action = getattr(state.queue, name)

        def fire() -> dict[str, Any]:
            record: TransitionRecord = action(job_id, source=source)
            return {"changed": record.changed, "job": job_json(state, state.queue.get(job_id))}

        route = f"{PREFIX}/jobs/{job_id}/{name}"
        return answered_once(state, idempotency_key, route, None, fire)[0]

    act.__name__ = f"{name}_job"
    act.__doc__ = (
        f"{name.capitalize()} the job through the transition table: 409 with the reason "
        "when the table refuses; a request already satisfied changes nothing (changed: false)."
    )
    return act


for _name in ("cancel", "pause", "resume"):
    router.add_api_route(f"/jobs/{{job_id}}/{_name}", _request(_name), methods=["POST"])


@router.post("/jobs/{job_id}/retry")
def retry_job(
    job_id: JobId,
    request: Request,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:
    """Retry the job as `python -m app retry` does: a failed or timed-out job runs again
    (the same job, attempt + 1); a finished or cancelled member of a group (a batch's or a
    grid's cell) is re-run into its cell, a new job (`rerun_of` names the old one) that its
    grid then recomposes. `job` is the job that will run; 409 with the reason when the
    table refuses."""
    state = state_of(request)
    source = source_for(client_name(request))

    def fire() -> dict[str, Any]:
        runs = retry_member(state.queue, job_id, source=source)
        return {"changed": True, "job": job_json(state, state.queue.get(runs))}

    route = f"{PREFIX}/jobs/{job_id}/retry"
    return answered_once(state, idempotency_key, route, None, fire)[0]


@router.post("/jobs/{job_id}/star")
def star_job(
    job_id: JobId,
    request: Request,
    body: StarBody | None = None,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:
    """Star (or with `{"starred": false}` unstar) a job: never pruned."""
    state = state_of(request)

    def starred() -> dict[str, Any]:
        star(state.queue, job_id, on=True if body is None else body.starred)
        return job_json(state, state.queue.get(job_id))

    route = f"{PREFIX}/jobs/{job_id}/star"
    return answered_once(state, idempotency_key, route, body or StarBody(), starred)[0]


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
            "architecture": m.architecture.value if m.architecture else "",  # "sd1"
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
        "init_image": job.init_image, "speed": job.speed, "compile": job.compile,
        "priority": job.priority, "attempt": job.attempt, "max_attempts": job.max_attempts,
        "given_up": job.given_up, "starred": job.starred,
        "progress": {"step": job.progress_step, "total": job.progress_total,
                     "live_step": state.live_step(job.id or 0)},
        "eta_s": None if eta is None else round(eta, 2),
        "error": state.redact(job.error) if job.error else job.error,
        "rerun_of": job.rerun_of, "created_at": job.created_at, "started_at": job.started_at,
        "finished_at": job.finished_at,
        "links": {"self": base, "image": f"{base}/image" if status is JobStatus.SUCCESS else None,
                  "preview": f"{base}/preview", "events": f"{PREFIX}/events?job={job.id}"},
    }  # fmt: skip
    out.update(what_it_draws(job))
    if job.scheduler_config:  # a few-step LoRA's schedule, over the model's own
        out["scheduler_config"] = decode_scheduler_config(job.scheduler_config)
    if job.kind == KIND_VIDEO:  # its output (links.image) is an MP4 of these frames
        out["video"] = {"frames": job.frames, "fps": job.fps, **_conditions(job)}
    if job.last_image:  # a first-and-last-frame clip's last frame, as init_image its first
        out["last_image"] = job.last_image
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


def what_it_draws(job: Job) -> dict[str, Any]:
    """What a job was asked for beyond its settings: its kind and group, a mask, control
    layers, references, a variation seed, the wildcard template, an edit's input images
    after the one it edits (`init_image`), each as the job stores it ("upload:<sha256>")."""
    return {
        "kind": job.kind, "group_id": job.group_id, "group_cell": job.group_cell,
        "prompt_template": job.prompt_template, "mask": job.mask or None,
        "mask_blur": job.mask_blur, "only_masked": job.only_masked,
        "mask_padding": job.mask_padding, "variation_seed": job.variation_seed,
        "variation_strength": job.variation_strength,
        "control": [asdict(layer) for layer in decode_control(job.control)],
        "references": [asdict(ref) for ref in decode_reference(job.reference)],
        "edit_images": list(decode_edit_images(job.edit_images)),
    }  # fmt: skip


def _conditions(job: Job) -> dict[str, Any]:
    """A clip's hold on its images and its last image's frame, where not stock's (full
    strength, the clip's last frame): the body's fields of the same names."""
    if params_of(job).has_condition_settings:
        return {"image_strength": job.image_strength,
                "last_image_strength": job.last_image_strength,
                "last_image_frame": job.last_image_frame}  # fmt: skip
    return {}


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
