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

One reader for every stream (`EventHub`): while any stream is open, one task of the
server reads the history table and the running jobs' progress once per `POLL_S` and
keeps the newest `BUFFER` transitions it handed on; each stream takes what is after its
own cursor from there, woken when something new came, so N streams cost the database
what one does. A stream that resumes from further back than the buffer reaches reads the
table itself, with its own cursor, until it is within the buffer.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.engine.jobs.queue import MAX_JOB_ID, JobQueue

router = APIRouter(tags=["events"])
log = logging.getLogger(__name__)

POLL_S = 0.05
KEEP_ALIVE_S = 15.0
GAP_WAIT_S = 2.0
BATCH = 500
MAX_ROW_ID = 2**63 - 1  # the largest id a database row can have (64-bit integers)
BUFFER = 5000  # transitions the hub keeps for its streams (a reconnect within them reads none)
WAKE_S = 1.0  # a stream waiting for news looks at its connection at least this often


@dataclass
class Cursor:
    last_id: int
    waits_for_gaps: bool


def read_after(queue: JobQueue, cursor: Cursor, job_id: int | None) -> list[dict[str, Any]]:
    """The transitions after `cursor.last_id` that may be handed on now, in id order; moves
    the cursor past them (see the module's note on gaps)."""
    rows = queue.transitions_after(cursor.last_id, BATCH)
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


def transition_event(row: dict[str, Any]) -> str:
    data = {"id": row["id"], "job_id": row["job_id"], "attempt": row["attempt"],
            "from": row["from_status"], "to": row["to_status"], "event": row["event"],
            "source": row["source"], "message": row["message"], "at": row["at"]}  # fmt: skip
    return f"id: {row['id']}\nevent: transition\ndata: {json.dumps(data)}\n\n"


def progress_event(job_id: int, step: int, total: int) -> str:
    data = json.dumps({"job_id": job_id, "step": step, "total": total})
    return f"event: progress\ndata: {data}\n\n"


class EventHub:
    """The one reader of the history table for every open stream of this server.

    Invariant: every transition that may be handed on with an id in (`base`, `last_id`]
    is in the buffer, in id order; a stream whose cursor is at `base` or later takes its
    rows from there. Runs (in the server's event loop) only while a stream is open.
    """

    def __init__(self, queue: JobQueue, *, poll_s: float = POLL_S, keep: int = BUFFER) -> None:
        self.queue = queue
        self.poll_s = poll_s
        self.keep = keep
        self.base = 0
        self.last_id = 0
        self.progress: dict[int, tuple[int, int]] = {}
        self.polls = 0  # reads of the table so far (what a test counts)
        self._rows: list[dict[str, Any]] = []
        self._ids: list[int] = []
        self._streams = 0
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Lock | None = None
        self._news: asyncio.Event | None = None

    async def join(self) -> None:
        """A stream opens: start reading, from the newest transition, if none was open."""
        self._streams += 1
        self._starting = self._starting or asyncio.Lock()
        async with self._starting:
            if self._task is None:
                newest = await run_in_threadpool(self.queue.newest_transition_id)
                self.base = self.last_id = newest
                self._rows, self._ids, self.progress = [], [], {}
                self._news = asyncio.Event()
                self._task = asyncio.create_task(self._run(), name="event-hub")

    def leave(self) -> None:
        self._streams -= 1
        if self._streams == 0 and self._task is not None:
            self._task.cancel()  # no stream left: nothing reads the table
            self._task = None

    def news(self) -> asyncio.Event:
        """Set once something arrives after now (take it before reading)."""
        assert self._news is not None, "join first"
        return self._news

    def after(self, last_id: int, job_id: int | None) -> list[dict[str, Any]]:
        """The buffered transitions after `last_id` (which must be `base` or later)."""
        rows = self._rows[bisect.bisect_right(self._ids, last_id) :]
        return rows if job_id is None else [row for row in rows if row["job_id"] == job_id]

    async def _run(self) -> None:
        while True:
            try:
                more = await self._poll()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the store locked or away: the next poll tries again
                log.warning("events: %s", error)
                more = False
            if not more:
                await asyncio.sleep(self.poll_s)

    async def _poll(self) -> bool:
        # The thread moves a cursor of its own: `last_id` moves only once its rows are in.
        cursor = Cursor(self.last_id, waits_for_gaps=not self.queue.ids_in_commit_order)
        rows = await run_in_threadpool(read_after, self.queue, cursor, None)
        progress = await run_in_threadpool(self.queue.running_progress)
        self.polls += 1
        self._rows += rows
        self._ids += [row["id"] for row in rows]
        self.last_id = cursor.last_id
        if len(self._rows) > 2 * self.keep:  # trimmed now and then, not at every row
            drop = len(self._rows) - self.keep
            self.base = self._ids[drop - 1]
            del self._rows[:drop], self._ids[:drop]
        if rows or progress != self.progress:
            self.progress = progress
            assert self._news is not None
            self._news.set()
            self._news = asyncio.Event()
        return len(rows) == BATCH


def hub_of(request: Request) -> EventHub:
    state = request.app.state
    if getattr(state, "event_hub", None) is None:
        state.event_hub = EventHub(state.easel.queue, poll_s=POLL_S, keep=BUFFER)
    hub: EventHub = state.event_hub
    return hub


@router.get("/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}}})  # fmt: skip
async def events(
    request: Request,
    job: Annotated[
        int | None, Query(ge=1, le=MAX_JOB_ID, description="only this job's events")
    ] = None,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_ROW_ID, description="transitions after this id")
    ] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """Transitions (`event: transition`, id = the history row's id) and progress
    (`event: progress`). Reconnect with `Last-Event-ID` (or `?after=`) to miss nothing;
    without either the stream starts at the newest transition."""
    queue: JobQueue = request.app.state.easel.queue
    start = _event_id(last_event_id) if last_event_id else after
    if start is None:
        start = await run_in_threadpool(queue.newest_transition_id)
    cursor = Cursor(start, waits_for_gaps=not queue.ids_in_commit_order)
    return StreamingResponse(
        _stream(request, hub_of(request), cursor, job), media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )  # fmt: skip


async def _stream(
    request: Request, hub: EventHub, cursor: Cursor, job_id: int | None
) -> AsyncIterator[str]:
    yield "retry: 1000\n\n"
    redact = request.app.state.easel.redact
    try:
        await hub.join()  # inside: a join that fails (the store away) is left again
        progress: dict[int, tuple[int, int]] = {}
        quiet_since = time.monotonic()
        while not await request.is_disconnected():
            news = hub.news()
            behind = cursor.last_id < hub.base  # resumed from before the buffer: the table
            if behind:
                rows = await run_in_threadpool(read_after, hub.queue, cursor, job_id)
            else:
                rows = hub.after(cursor.last_id, job_id)
                cursor.last_id = max(cursor.last_id, hub.last_id)
            now_progress = {
                running: steps
                for running, steps in hub.progress.items()
                if job_id is None or running == job_id
            }
            sent = False
            for row in rows:  # a failure's message may name a server folder: not sent
                message = row["message"] and redact(row["message"])
                yield transition_event({**row, "message": message})
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
            if behind:
                if len(rows) < BATCH:
                    await asyncio.sleep(hub.poll_s)
                continue
            with contextlib.suppress(TimeoutError):  # look at the connection again
                await asyncio.wait_for(news.wait(), timeout=WAKE_S)
    finally:
        hub.leave()


def _event_id(text: str) -> int:
    from fastapi import HTTPException

    digits = text.strip()
    # ASCII only: "²".isdigit() is true but int() refuses it; past 2^63 no row has the id.
    numeric = digits.isascii() and digits.isdigit() and len(digits.lstrip("0")) <= 19
    if not numeric or int(digits) > MAX_ROW_ID:
        raise HTTPException(400, f"Last-Event-ID {text[:40]!r} is not a transition id")
    return int(digits)
