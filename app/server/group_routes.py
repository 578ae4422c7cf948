"""Groups over HTTP, as `python -m app group show|pause|resume|cancel|retry GROUP` and the
window's batch and grid actions: `GET /api/v1/groups/{id}` (its jobs, cell by cell, and
how many are in each state) and `POST /api/v1/groups/{id}/pause|resume|cancel|retry`,
every member the action applies to moved in one transaction through the table."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi import Path as PathParameter

from app.engine.jobs.groups import GroupInfo, act_on_group, group_info, newest_members
from app.engine.jobs.queue import MAX_JOB_ID, TransitionRecord
from app.engine.jobs.states import GroupAction, JobStatus
from app.server.api_v1 import PREFIX, job_json, state_of
from app.server.idempotency import IdempotencyKey, answered_once
from app.server.requests import client_name, source_for
from app.server.state import ServerState

router = APIRouter(prefix=PREFIX, tags=["groups"])
GroupId = Annotated[int, PathParameter(ge=1, le=MAX_JOB_ID, description="a group's id")]

GROUP_EXAMPLE = {
    "id": 4, "kind": "batch", "label": "a red circle (x2)", "spec": {},
    "counts": {"SUCCESS": 1, "RUNNING": 1},
    "jobs": [{"cell": 0, "replaced": False, "job": {"id": 20, "status": "SUCCESS"}},
             {"cell": 1, "replaced": False, "job": {"id": 21, "status": "RUNNING"}}],
}  # fmt: skip
SHOWN: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {"example": GROUP_EXAMPLE}}}
}
ACTED: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {"example": {
        "changed": True, "replayed": False,
        "moved": [{"job_id": 21, "from": "RUNNING", "to": "PAUSING"}], "group": GROUP_EXAMPLE,
    }}}},
}  # fmt: skip


@router.get("/groups/{group_id}", responses=SHOWN)
def get_group(group_id: GroupId, request: Request) -> dict[str, Any]:
    """A batch or grid: its jobs cell by cell (a re-run cell's older job marked `replaced`,
    a grid's composer with no cell) and how many of its current jobs are in each state."""
    state = state_of(request)
    return group_json(state, group_info(state.queue, group_id))


def group_json(state: ServerState, info: GroupInfo) -> dict[str, Any]:
    current = newest_members(info)
    newest = {job.id for job in current}
    counts = Counter(JobStatus(job.status).value for job in current)
    return {
        "id": info.group_id, "kind": info.kind, "label": info.label, "spec": info.spec,
        "counts": dict(counts),
        "jobs": [{"cell": job.group_cell, "replaced": job.id not in newest,
                  "job": job_json(state, job)} for job in info.members],
    }  # fmt: skip


def _acting(action: GroupAction) -> Any:
    def act(
        group_id: GroupId, request: Request, idempotency_key: IdempotencyKey = None
    ) -> dict[str, Any]:
        state = state_of(request)
        source = source_for(client_name(request))

        def move() -> dict[str, Any]:
            moved = act_on_group(state.queue, group_id, action, source=source)
            return {"changed": bool(moved), "moved": [_moved(record) for record in moved],
                    "group": group_json(state, group_info(state.queue, group_id))}  # fmt: skip

        route = f"{PREFIX}/groups/{group_id}/{action.value}"
        answer, replayed = answered_once(state, idempotency_key, route, None, move)
        return {**answer, "replayed": replayed}

    act.__name__ = f"{action.value}_group"
    act.__doc__ = (
        f"{action.value.capitalize()} every job of the group the table allows it for, in one "
        "transaction (`group " + action.value + " GROUP`); the others are left as they are "
        "(`changed: false` when none moved)."
    )
    return act


def _moved(record: TransitionRecord) -> dict[str, Any]:
    before = None if record.from_status is None else JobStatus(record.from_status).value
    return {"job_id": record.job_id, "from": before, "to": JobStatus(record.to_status).value}


for _action in GroupAction:
    router.add_api_route(
        f"/groups/{{group_id}}/{_action.value}", _acting(_action), methods=["POST"],
        responses=ACTED,
    )  # fmt: skip
