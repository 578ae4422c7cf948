"""Dependent jobs: a child waits BLOCKED until every parent succeeded.

See docs/architecture.md, *The job graph*.

Reactions run after the parent's commit, as a queue listener (`graph_listener`): a parent's
SUCCESS unblocks the children whose parents are now all SUCCESS, a parent's CANCELLED
cancels its BLOCKED children (each of them then cancels its own). Both are conditional
(`only_from=BLOCKED`, and `JobQueue.fire` refuses UNBLOCK while a parent is not SUCCESS),
so firing twice does nothing twice. `reconcile` does the same for every BLOCKED job, at
launch and with the watchdog, so a crash between the two commits never strands a child: the
stored state is reconciled rather than trusting that a reaction was delivered. A parent that
failed leaves its children BLOCKED; `waiting_reason` says why, and retrying the parent
carries the chain on.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy import and_, bindparam, false, func, not_, or_, select, true

from app.engine.jobs.graph_sql import (
    InputKind,
    control_kind,
    edit_kind,
    is_settled,
    reference_kind,
    settled_sql,
    stored_input,
)
from app.engine.jobs.groups import recompose_if_stale, recompose_stale
from app.engine.jobs.params import (
    INIT_FROM_JOB,
    KIND_GENERATE,
    KIND_TILED,
    KIND_UPSCALE,
    RANDOM_SEED,
    SIZE_MULTIPLE,
    GenerationParams,
)
from app.engine.jobs.queue import (
    JobNotFound,
    JobQueue,
    TransitionListener,
    TransitionRecord,
    params_of,
)
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.states import JobEvent, JobStatus, TransitionNotAllowed
from app.engine.paths import recorded_file
from app.errors import EaselError
from app.models.db import Database
from app.models.tables import JOB, JOB_PARENT, Job

log = logging.getLogger(__name__)

SOURCE = "graph"
RECONCILE_SOURCE = "reconcile"
DEFAULT_UPSCALE = 2.0
DEFAULT_UPSCALE_STRENGTH = 0.35
DEFAULT_VARIATIONS = 4
DEFAULT_VARIATION_STRENGTH = 0.3

S = JobStatus
_PARENT = JOB.alias("parent")
_CHILD = JOB.alias("child")


class InputImageMissing(EaselError):
    """A job's init image is gone (its parent's output file was deleted or moved)."""


# --- reading the graph ------------------------------------------------------------------------


def parents_of(queue: JobQueue, job_id: int) -> list[int]:
    query = select(JOB_PARENT.c.parent_id).where(JOB_PARENT.c.job_id == job_id)
    with queue.db.read() as conn:
        return sorted(conn.execute(query).scalars())


def children_of(queue: JobQueue, job_id: int) -> list[int]:
    query = select(JOB_PARENT.c.job_id).where(JOB_PARENT.c.parent_id == job_id)
    with queue.db.read() as conn:
        return sorted(conn.execute(query).scalars())


def parent_jobs(queue: JobQueue, job_id: int) -> list[Job]:
    query = (
        select(JOB)
        .join(JOB_PARENT, JOB_PARENT.c.parent_id == JOB.c.id)
        .where(JOB_PARENT.c.job_id == job_id)
        .order_by(JOB.c.id)
    )
    with queue.db.read() as conn:
        return [Job.model_validate(row._mapping) for row in conn.execute(query)]


def waiting_reason(queue: JobQueue, job_id: int) -> str:
    """Why a BLOCKED job still waits ("waiting for #12, which failed: ..."); "" otherwise."""
    if queue.get(job_id).status != S.BLOCKED:
        return ""
    waiting = [parent for parent in parent_jobs(queue, job_id) if parent.status != S.SUCCESS]
    return "; ".join(_waiting_for(parent) for parent in waiting)


def _waiting_for(parent: Job) -> str:
    status, error = JobStatus(parent.status), parent.error or "no reason recorded"
    if status in (S.FAILED, S.TIMEOUT) and parent.given_up:
        return f"waiting for #{parent.id}, which was given up: {error}"
    if status is S.FAILED:
        return f"waiting for #{parent.id}, which failed: {error}"
    if status is S.TIMEOUT:
        return f"waiting for #{parent.id}, which timed out"
    if status is S.CANCELLED:
        return f"#{parent.id} was cancelled"
    return f"waiting for #{parent.id} ({status.value.lower()})"


# --- reacting to parents ----------------------------------------------------------------------


def graph_listener(queue: JobQueue) -> TransitionListener:
    """The queue listener that carries chains on right after a parent's commit."""

    def react(record: TransitionRecord) -> None:
        if not record.changed:
            return
        if record.to_status in (S.SUCCESS, S.CANCELLED, S.FAILED, S.TIMEOUT):
            # FAILED and TIMEOUT matter to a grid waiting for its cells to be settled.
            for child in children_to_settle(queue.db, record.job_id):
                settle_blocked(queue, child, source=SOURCE)
            if record.to_status is S.SUCCESS:
                recompose_if_stale(queue, record.job_id, source=SOURCE)  # a grid's late cell
        elif record.event is JobEvent.SUBMIT_AFTER:
            # Its parents may have finished while it was being submitted.
            settle_blocked(queue, record.job_id, source=SOURCE)

    return react


def children_to_settle(db: Database, parent_id: int) -> list[int]:
    """The BLOCKED children of `parent_id` whose parents now decide their fate: none holds
    them any more (UNBLOCK), or a parent they need was cancelled (CANCEL). One read, so a
    grid's cell that is not its last costs its grid no more than that (`settle_blocked`
    reads each child's edges again before it fires)."""
    rows = _rows(db, _TO_SETTLE, {"parent_id": parent_id})
    return [child for child, holding, cancelled in rows if holding == 0 or cancelled > 0]


def settle_blocked(queue: JobQueue, job_id: int, *, source: str) -> TransitionRecord | None:
    """UNBLOCK a BLOCKED job whose parents all succeeded (or, for a parent it waits for
    until settled, are settled), CANCEL one with a cancelled parent it needs.

    Idempotent: None when there is nothing to do or the job moved on meanwhile.
    """
    with queue.db.read() as conn:
        rows = conn.execute(_EDGES.where(JOB_PARENT.c.job_id == job_id)).all()
    return _settle(queue, job_id, [_edge(row) for row in rows], source)


@dataclass(frozen=True)
class _Edge:
    parent: int
    status: JobStatus
    until_settled: bool  # the child waits for the parent to be settled, not to succeed
    settled: bool


_EDGES = (
    select(
        JOB_PARENT.c.job_id,
        JOB_PARENT.c.parent_id,
        _PARENT.c.status,
        JOB_PARENT.c.settled,
        _PARENT.c.given_up,
        _PARENT.c.error_transient,
    )
    .join(_PARENT, _PARENT.c.id == JOB_PARENT.c.parent_id)
    .order_by(JOB_PARENT.c.job_id, JOB_PARENT.c.parent_id)
)


_EDGE, _OF = JOB_PARENT.alias("edge"), JOB.alias("of")
# Edges that still hold a child: a parent it needs that has not succeeded (a cancelled one
# is counted apart: it cancels the child), or one it waits for until settled, not settled.
_HOLDING = (
    select(func.count())
    .select_from(_EDGE.join(_OF, _OF.c.id == _EDGE.c.parent_id))
    .where(
        _EDGE.c.job_id == _CHILD.c.id,
        or_(
            and_(_EDGE.c.settled == false(), _OF.c.status != S.SUCCESS.value),
            and_(_EDGE.c.settled == true(), not_(settled_sql(_OF))),
        ),
    )
    .scalar_subquery()
)
_CANCELLED_NEEDED = (
    select(func.count())
    .select_from(_EDGE.join(_OF, _OF.c.id == _EDGE.c.parent_id))
    .where(
        _EDGE.c.job_id == _CHILD.c.id,
        _EDGE.c.settled == false(),
        _OF.c.status == S.CANCELLED.value,
    )
    .scalar_subquery()
)
_TO_SETTLE = (
    select(JOB_PARENT.c.job_id, _HOLDING, _CANCELLED_NEEDED)
    .join(_CHILD, _CHILD.c.id == JOB_PARENT.c.job_id)
    .where(JOB_PARENT.c.parent_id == bindparam("parent_id"), _CHILD.c.status == S.BLOCKED.value)
    .order_by(JOB_PARENT.c.job_id)
)


def _rows(db: Database, query: Any, values: dict[str, Any]) -> list[Any]:
    with db.read() as conn:
        return list(conn.execute(query, values))


def _edge(row: Any) -> _Edge:
    _job_id, parent, status, until_settled, given_up, transient = row
    settled = is_settled(status, bool(given_up), transient)
    return _Edge(parent, JobStatus(status), bool(until_settled), settled)


def _settle(
    queue: JobQueue, job_id: int, parents: Sequence[_Edge], source: str
) -> TransitionRecord | None:
    needed = [edge for edge in parents if not edge.until_settled]
    cancelled = [edge.parent for edge in needed if edge.status is S.CANCELLED]
    if cancelled:
        event, message = JobEvent.CANCEL, f"parent #{cancelled[0]} was cancelled"
    elif (
        parents
        and all(edge.status is S.SUCCESS for edge in needed)
        and all(edge.settled for edge in parents if edge.until_settled)
    ):
        ids = ", ".join(f"#{edge.parent}" for edge in parents)
        word = "succeeded" if not any(e.until_settled for e in parents) else "is settled"
        event, message = JobEvent.UNBLOCK, f"every parent {word} ({ids})"
    else:
        return None
    try:
        return queue.fire(job_id, event, source=source, message=message, only_from={S.BLOCKED})
    except (TransitionNotAllowed, JobNotFound) as moved:
        log.debug("job %s moved on before its %s: %s", job_id, event.value, moved)
        return None


@dataclass
class ReconcileReport:
    unblocked: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    recomposed: list[int] = field(default_factory=list)  # grids queued again (`groups`)


def reconcile(queue: JobQueue, *, source: str = RECONCILE_SOURCE) -> ReconcileReport:
    """Settle every BLOCKED job whose parents decided its fate (one read, then the fires)."""
    report = ReconcileReport()
    for job_id, parents in _blocked_with_parents(queue.db).items():
        record = _settle(queue, job_id, parents, source)
        if record is not None and record.to_status is S.PENDING:
            report.unblocked.append(job_id)
        elif record is not None:
            report.cancelled.append(job_id)
    report.recomposed = recompose_stale(queue, source=source)
    if report.unblocked or report.cancelled or report.recomposed:
        log.info("reconciled blocked jobs: %s", report)
    return report


def _blocked_with_parents(db: Database) -> dict[int, list[_Edge]]:
    query = _EDGES.join(_CHILD, _CHILD.c.id == JOB_PARENT.c.job_id).where(
        _CHILD.c.status == S.BLOCKED.value
    )
    blocked: dict[int, list[_Edge]] = defaultdict(list)
    with db.read() as conn:
        for row in conn.execute(query):
            blocked[row[0]].append(_edge(row))
    return blocked


def orphaned_children(db: Database) -> int:
    """Children in a state the graph forbids (goal: 0, checked by the chaos benchmark).

    BLOCKED although every parent succeeded or one was cancelled (stranded), or past
    BLOCKED (runnable, running or done) although a parent is not SUCCESS.
    """
    # A grid's edges to its cells are not counted: it composes whatever its cells became,
    # and a cell retried after the grid was made is recomposed (`groups`), not an orphan.
    query = (
        select(JOB_PARENT.c.job_id, _CHILD.c.status, _PARENT.c.status)
        .join(_CHILD, _CHILD.c.id == JOB_PARENT.c.job_id)
        .join(_PARENT, _PARENT.c.id == JOB_PARENT.c.parent_id)
        .where(JOB_PARENT.c.settled == false())
    )
    children: dict[int, tuple[str, list[str]]] = {}
    with db.read() as conn:
        for job_id, child_status, parent_status in conn.execute(query):
            children.setdefault(job_id, (child_status, []))[1].append(parent_status)
    return sum(1 for status, parents in children.values() if _is_orphaned(status, parents))


def _is_orphaned(child_status: str, parent_statuses: Iterable[str]) -> bool:
    statuses = list(parent_statuses)
    if child_status == S.BLOCKED:
        return all(s == S.SUCCESS for s in statuses) or S.CANCELLED in statuses
    if child_status == S.CANCELLED:
        return False
    return any(s != S.SUCCESS for s in statuses)


# --- what artists submit (stored by `follow_ups`) ----------------------------------------------


def upscale_params(
    parent: GenerationParams,
    parent_id: int,
    *,
    scale: float,
    strength: float,
    upscaler: str = "",
    img2img: bool = True,
    tiled: bool = False,
) -> GenerationParams:
    """Hires fix: the parent's image resized by `scale` (Lanczos, or through the `upscaler`
    model), then img2img on the same model, prompt and seed. Without `img2img`: the model
    upscale alone, as a job of its own kind."""
    resized = replace(
        parent,
        width=_scaled(parent.width, scale),
        height=_scaled(parent.height, scale),
        init_image=f"{INIT_FROM_JOB}{parent_id}",
        strength=strength,
        mask="",  # an inpaint's upscale redraws its whole image, not its mask again
        upscaler=upscaler,
        variation_strength=0.0,
        variation_seed=RANDOM_SEED,
        kind=KIND_GENERATE,
        control="",  # a guided image's upscale starts from it: its layers have done their part
        reference="",
        edit_images="",  # likewise an edit's further input images
    )
    if tiled:
        return replace(resized, kind=KIND_TILED)
    if img2img:
        return resized
    return replace(resized, kind=KIND_UPSCALE, strength=1.0)


def variation_params(
    parent: GenerationParams, parent_id: int, *, strength: float
) -> GenerationParams:
    """img2img of the parent's image at low strength with a new (random) seed."""
    return replace(
        parent, init_image=f"{INIT_FROM_JOB}{parent_id}", strength=strength, seed=RANDOM_SEED,
        mask="", control="", reference="", edit_images="",
        variation_strength=0.0, variation_seed=RANDOM_SEED, kind=KIND_GENERATE,
    )  # fmt: skip


def _scaled(size: int, scale: float) -> int:
    return round(size * scale / SIZE_MULTIPLE) * SIZE_MULTIPLE


# --- the worker's side ------------------------------------------------------------------------


def run_inputs_of(queue: JobQueue, job: Job, outputs_dir: Path | None = None) -> RunInputs:
    """What `job`'s run needs beyond its parameters, read once when a worker claims it: its
    init image (a parent's output, or stored with the job), its mask, its control layers'
    and reference images. Raises `InputImageMissing` for one the parameters name but the
    store (or the outputs folder) no longer has."""
    return RunInputs(
        init_image=init_image_of(queue, job, outputs_dir),
        mask=mask_of(queue, job),
        control_images=control_images_of(queue, job),
        reference_images=reference_images_of(queue, job),
        edit_images=edit_images_of(queue, job),
        last_image=last_image_of(queue, job),
    )


def last_image_of(queue: JobQueue, job: Job) -> bytes | None:
    """The PNG bytes of a clip's last frame (stored with the job), if it has one."""
    if not job.last_image:
        return None
    png = stored_input(queue.db, job.id or 0, InputKind.LAST)
    if png is None:
        raise InputImageMissing(f"job {job.id}'s last image is missing from the database")
    return png


def init_image_of(queue: JobQueue, job: Job, outputs_dir: Path | None = None) -> bytes | None:
    """The PNG bytes of `job`'s init image (a parent's output, or stored with the job).

    On a shared store a parent's image file is read only from inside `outputs_dir` (the
    row naming it may be a peer's, naming any file)."""
    params = params_of(job)
    if not params.init_image:
        return None
    parent_id = params.init_parent
    if parent_id is not None:
        return _parent_output(queue, job.id or 0, parent_id, outputs_dir)
    png = stored_input(queue.db, job.id or 0, InputKind.INIT)
    if png is None:
        raise InputImageMissing(f"job {job.id}'s init image is missing from the database")
    return png


def mask_of(queue: JobQueue, job: Job) -> bytes | None:
    """The PNG bytes of `job`'s inpaint mask (stored with the job), if it has one."""
    if not job.mask:
        return None
    png = stored_input(queue.db, job.id or 0, InputKind.MASK)
    if png is None:
        raise InputImageMissing(f"job {job.id}'s inpaint mask is missing from the database")
    return png


def control_images_of(queue: JobQueue, job: Job) -> tuple[bytes, ...]:
    """The PNG bytes of each of `job`'s control layers (stored with the job), in order."""
    return _stored_images(
        queue, job, len(params_of(job).control_layers), control_kind, "control layer"
    )


def reference_images_of(queue: JobQueue, job: Job) -> tuple[bytes, ...]:
    """The PNG bytes of each of `job`'s reference images (stored with the job), in order."""
    return _stored_images(
        queue, job, len(params_of(job).references), reference_kind, "reference image"
    )


def edit_images_of(queue: JobQueue, job: Job) -> tuple[bytes, ...]:
    """The PNG bytes of each of an edit's input images after its init image, in order."""
    count = len(params_of(job).more_edit_images)
    return _stored_images(queue, job, count, edit_kind, "edit input")


def _stored_images(
    queue: JobQueue, job: Job, count: int, kind: Callable[[int], str], label: str
) -> tuple[bytes, ...]:
    images = []
    for index in range(count):
        png = stored_input(queue.db, job.id or 0, kind(index))
        if png is None:
            raise InputImageMissing(
                f"job {job.id}'s {label} {index} image is missing from the database"
            )
        images.append(png)
    return tuple(images)


def _parent_output(queue: JobQueue, job_id: int, parent_id: int, outputs_dir: Path | None) -> bytes:
    recorded = queue.get(parent_id).output_path
    folders = [outputs_dir] if outputs_dir is not None else []
    path = recorded_file(recorded, shared=queue.db.shares_files, folders=folders)
    if recorded and path is None:
        raise InputImageMissing(
            f"job {job_id}'s init image: job {parent_id}'s image is not in this machine's "
            "outputs folder"
        )
    if not path:
        raise InputImageMissing(f"job {job_id}'s init image: job {parent_id} has no output image")
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise InputImageMissing(
            f"job {job_id}'s init image {path} (the output of job {parent_id}) cannot be "
            f"read: {error.strerror or error}"
        ) from error
