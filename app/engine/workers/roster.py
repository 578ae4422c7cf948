"""The fleet, for the Workers panel and `python -m app workers` (no Qt; one read).

Every worker process, local or on another machine, keeps a row in the worker table (see
`presence`): its machine, device, model, state, current job, last sign of life and how many
images it finished. Reading adds what the rows cannot say themselves: a worker not heard
from for the liveness timeout is LOST (nobody writes that: a dead worker cannot), and the
job a worker holds comes from the job table, which is the truth about jobs. A worker that
holds a running job but has no row (it started before the table existed) is listed too.

The app's only write here is a request on a worker's row: drain (finish the job in hand,
then exit) or stop (pause it, then exit). The worker reads it with its presence beat.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Row, or_, select, update

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.liveness import WorkerIdentity
from app.engine.workers.worker_states import WorkerRequest, WorkerState, WorkerSummary
from app.errors import BadInput
from app.models.tables import JOB, WORKER

_RUNNING = [status.value for status in JobStatus if status.is_running]


def list_workers(
    queue: JobQueue, *, timeout_s: float, now: float | None = None
) -> list[WorkerSummary]:
    """Every worker known, the live ones first (busy, then most recently heard), then the
    exited and lost ones. `timeout_s`: the liveness timeout (Settings' heartbeat timeout)."""
    now = queue.clock() if now is None else now
    holding_query = select(JOB.c.worker_id, JOB.c.id, JOB.c.heartbeat_at).where(
        JOB.c.status.in_(_RUNNING), JOB.c.worker_id.is_not(None)
    )
    with queue.db.read() as conn:
        holding = {worker: (job_id, beat) for worker, job_id, beat in conn.execute(holding_query)}
        rows = list(conn.execute(select(WORKER)))
    summaries = [_from_row(row, holding, timeout_s, now) for row in rows]
    known = {row.id for row in rows}
    summaries += [
        _from_job(worker, job_id, beat, timeout_s, now)
        for worker, (job_id, beat) in holding.items()
        if worker not in known
    ]
    return sorted(summaries, key=_live_busy_recent)


def _from_row(
    row: Row[Any], holding: dict[str, tuple[int, float | None]], timeout_s: float, now: float
) -> WorkerSummary:
    values = row._mapping
    state = WorkerState(values["state"])
    heard = float(values["last_seen_at"])
    job_id, beat = holding.get(values["id"], (None, None))
    if beat is not None:
        heard = max(heard, beat)  # a busy worker's job heartbeat is a sign of life too
    if not state.is_gone and now - heard > timeout_s:
        state = WorkerState.LOST
    request = values["request"]
    return WorkerSummary(
        worker_id=values["id"],
        machine=values["machine"],
        state=state,
        current_job=job_id if not state.is_gone else None,
        last_heard_s=max(0.0, now - heard),
        jobs_done=int(values["jobs_done"]),
        device=values["device"],
        model=values["model"],
        request=WorkerRequest(request) if request and not state.is_gone else None,
        models=() if state.is_gone else _held(values.get("models")),
    )


def _from_job(
    worker: str, job_id: int, beat: float | None, timeout_s: float, now: float
) -> WorkerSummary:
    identity = WorkerIdentity.parse(worker)
    fresh = beat is not None and now - beat <= timeout_s
    return WorkerSummary(
        worker_id=worker,
        machine=identity.host if identity is not None else worker,
        state=WorkerState.BUSY if fresh else WorkerState.LOST,
        current_job=job_id,
        last_heard_s=max(0.0, now - beat) if beat is not None else None,
        jobs_done=0,
    )


def _held(listed: str | None) -> tuple[str, ...]:
    """The worker row's `models` (a JSON list); a damaged value holds none."""
    try:
        models = json.loads(listed) if listed else []
    except ValueError:
        return ()
    return tuple(m for m in models if isinstance(m, str)) if isinstance(models, list) else ()


def _live_busy_recent(summary: WorkerSummary) -> tuple[bool, bool, float, str]:
    heard = summary.last_heard_s if summary.last_heard_s is not None else float("inf")
    return summary.state.is_gone, summary.current_job is None, heard, summary.worker_id


def request_workers(
    queue: JobQueue,
    target: str,
    request: WorkerRequest,
    *,
    requested_by: str,
    timeout_s: float,
    now: float | None = None,
) -> list[WorkerSummary]:
    """Ask the live workers that `target` names (an id, its token, or a machine name: all of
    that machine's workers) to drain or stop. Returns them; `BadInput` if none is live.

    A stop is never turned back into a drain: pausing sooner is what the first asker wanted."""
    chosen = [w for w in list_workers(queue, timeout_s=timeout_s, now=now) if _named(w, target)]
    live = [w for w in chosen if not w.state.is_gone and w.state is not WorkerState.STOPPING]
    if not live:
        raise BadInput(_nobody_called(target, chosen))
    ids = [w.worker_id for w in live]
    stronger_kept = or_(WORKER.c.request.is_(None), WORKER.c.request != WorkerRequest.STOP.value)
    with queue.db.write() as conn:
        rows = conn.execute(select(WORKER.c.id).where(WORKER.c.id.in_(ids))).scalars().all()
        if not rows:  # listed from its job only: it keeps no row to read a request from
            raise BadInput(
                f"worker {target!r} runs an older Easel that cannot be asked to drain or stop"
            )
        conn.execute(
            update(WORKER)
            .where(WORKER.c.id.in_(ids), stronger_kept)
            .values(request=request.value, requested_by=requested_by)
        )
    return [w for w in live if w.worker_id in rows]


_AS_WORDS = {
    WorkerState.EXITED: "has exited",
    WorkerState.LOST: "is lost (not heard from)",
    WorkerState.STOPPING: "is already stopping",
}


def _named(worker: WorkerSummary, target: str) -> bool:
    identity = WorkerIdentity.parse(worker.worker_id)
    token = identity.token if identity is not None else None
    return target in (worker.worker_id, worker.machine, token)


def _nobody_called(target: str, chosen: list[WorkerSummary]) -> str:
    if chosen:
        states = " / ".join(sorted({_AS_WORDS.get(w.state, w.state.value) for w in chosen}))
        return f"worker {target!r} {states}: there is nothing to ask of it"
    return (
        f"no worker is called {target!r}; `python -m app workers` lists them "
        "(give a machine name or a worker id)"
    )
