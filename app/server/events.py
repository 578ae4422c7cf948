"""`GET /api/v1/events`: Server-Sent Events of transitions and progress.

Transitions come from the history table itself, each with its `job_transition` id as the
event id, so a client that reconnects with `Last-Event-ID` (browsers' EventSource does it
by itself) receives every transition after that one exactly once, across server restarts.
Progress is not history (one row per status change): it is sent as `progress` events,
without an id, when a running job's step changes.

PostgreSQL hands out ids before commit, so a transaction can commit after one with a higher
id: a reader that ran ahead would never see it. Rows are therefore handed on in id order
only up to the first gap; a gap is waited for (it fills at its commit) until the row after
it is `GAP_WAIT_S` old, and then counts as a rolled-back id. SQLite gives ids in commit
order (its write lock), so there is nothing to wait for there.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import func, select
from starlette.concurrency import run_in_threadpool

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.models.tables import JOB, TRANSITION

router = APIRouter(tags=["events"])

POLL_S = 0.05
KEEP_ALIVE_S = 15.0
GAP_WAIT_S = 2.0
BATCH = 500
_RUNNING = [status.value for status in JobStatus if status.is_running]


@dataclass
class Cursor:
    last_id: int
    waits_for_gaps: bool


def read_after(queue: JobQueue, cursor: Cursor, job_id: int | None) -> list[dict[str, Any]]:
    """The transitions after `cursor.last_id` that may be handed on now, in id order; moves
    the cursor past them (see the module's note on gaps)."""
    query = select(TRANSITION).where(TRANSITION.c.id > cursor.last_id)
    query = query.order_by(TRANSITION.c.id).limit(BATCH)
    with queue.db.read() as conn:
        rows = [dict(row._mapping) for row in conn.execute(query)]
    now = queue.clock()
    ready: list[dict[str, Any]] = []
    for row in rows:
        gap = row["id"] != cursor.last_id + 1
        if cursor.waits_for_gaps and gap and row["at"] > now - GAP_WAIT_S:
            break  # an earlier id may still commit
        cursor.last_id = row["id"]
        if job_id is None or row["job_id"] == job_id:
            ready.append(row)
    return ready


def newest_id(queue: JobQueue) -> int:
    with queue.db.read() as conn:
        return int(conn.execute(select(func.coalesce(func.max(TRANSITION.c.id), 0))).scalar_one())


def progress_of(queue: JobQueue, job_id: int | None) -> dict[int, tuple[int, int]]:
    query = select(JOB.c.id, JOB.c.progress_step, JOB.c.progress_total).where(
        JOB.c.status.in_(_RUNNING)
    )
    if job_id is not None:
        query = query.where(JOB.c.id == job_id)
    with queue.db.read() as conn:
        return {int(i): (int(step), int(total)) for i, step, total in conn.execute(query)}


def transition_event(row: dict[str, Any]) -> str:
    data = {"id": row["id"], "job_id": row["job_id"], "attempt": row["attempt"],
            "from": row["from_status"], "to": row["to_status"], "event": row["event"],
            "source": row["source"], "message": row["message"], "at": row["at"]}  # fmt: skip
    return f"id: {row['id']}\nevent: transition\ndata: {json.dumps(data)}\n\n"


def progress_event(job_id: int, step: int, total: int) -> str:
    data = json.dumps({"job_id": job_id, "step": step, "total": total})
    return f"event: progress\ndata: {data}\n\n"


@router.get("/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}}})  # fmt: skip
async def events(
    request: Request,
    job: Annotated[int | None, Query(description="only this job's events")] = None,
    after: Annotated[int | None, Query(description="transitions after this id")] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """Transitions (`event: transition`, id = the history row's id) and progress
    (`event: progress`). Reconnect with `Last-Event-ID` (or `?after=`) to miss nothing;
    without either the stream starts at the newest transition."""
    queue: JobQueue = request.app.state.easel.queue
    start = _event_id(last_event_id) if last_event_id else after
    if start is None:
        start = await run_in_threadpool(newest_id, queue)
    cursor = Cursor(start, waits_for_gaps=not queue.db.is_sqlite)
    return StreamingResponse(
        _stream(request, queue, cursor, job), media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )  # fmt: skip


async def _stream(
    request: Request, queue: JobQueue, cursor: Cursor, job_id: int | None
) -> AsyncIterator[str]:
    yield "retry: 1000\n\n"
    progress: dict[int, tuple[int, int]] = {}
    quiet_since = time.monotonic()
    while not await request.is_disconnected():
        rows = await run_in_threadpool(read_after, queue, cursor, job_id)
        now_progress = await run_in_threadpool(progress_of, queue, job_id)
        sent = False
        for row in rows:
            yield transition_event(row)
            sent = True
        for running_id, (step, total) in now_progress.items():
            if progress.get(running_id) != (step, total) and step > 0:
                yield progress_event(running_id, step, total)
                sent = True
        progress = now_progress
        if sent:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > KEEP_ALIVE_S:
            yield ": keep-alive\n\n"
            quiet_since = time.monotonic()
        if len(rows) < BATCH:
            await asyncio.sleep(POLL_S)


def _event_id(text: str) -> int:
    from fastapi import HTTPException

    if not text.strip().isdigit():
        raise HTTPException(400, f"Last-Event-ID {text[:40]!r} is not a transition id")
    return int(text)
