"""Groups of jobs: a batch, a grid or a wildcard expansion, stored as ordinary jobs.

See docs/architecture.md, *Groups of jobs*. A group is a `job_group` row that its jobs point
at (`job.group_id`, and `job.group_cell`: a batch's index, a grid's cell). Every member is an
ordinary job: it runs, pauses, fails, is retried or cancelled alone, and survives a crash as
any job does. A grid is one more member, with no cell, that waits for every cell to be
settled (`job_parent.settled`) and then composes them (`generation.grid`).

Group actions (pause, resume, cancel, retry all) go through the transition table for every
member, in one transaction (`JobQueue.fire_all`); members the action does not apply to are
left as they are.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from sqlalchemy import and_, bindparam, func, select

from app.engine.jobs.graph_sql import latest_cells
from app.engine.jobs.grid_spec import GridSpec, composer_params, describe, grid_cells
from app.engine.jobs.params import (
    KIND_GRID,
    MAX_SEED,
    RANDOM_SEED,
    GenerationParams,
    InvalidParameters,
)
from app.engine.jobs.queue import (
    DEFAULT_MAX_ATTEMPTS,
    JobQueue,
    NewGroup,
    NewJobs,
    StoredHook,
    TransitionRecord,
)
from app.engine.jobs.request_keys import RequestKey, internal_key
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.states import GroupAction as GroupAction  # re-exported for app.cli
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.jobs.wildcards import expand_all, expand_random, has_dynamic_syntax
from app.errors import UserError
from app.models.tables import JOB, JOB_GROUP, Job

BATCH, GRID, WILDCARDS = "batch", "grid", "wildcards"
MAX_BATCH = 100  # one submit queues at most this many jobs (a grid: cells)
SOURCE = "group"

Check = Callable[[GenerationParams], object]


class SeedMode(Enum):
    RANDOM = "random"  # each job its own random seed
    FIXED = "fixed"  # every job the same seed (with a variation seed, or wildcards)
    INCREMENT = "increment"  # seed, seed + 1, ... (A1111's batch count)


class GroupNotFound(UserError, LookupError):
    def __init__(self, group_id: int) -> None:
        super().__init__(f"There is no group {group_id}")


@dataclass(frozen=True)
class Group:
    group_id: int
    jobs: tuple[int, ...]  # the members with a cell, in cell order
    composer: int | None = None  # a grid's composing job
    replayed: bool = False  # its request's key was seen before: the first request's group


@dataclass(frozen=True)
class GroupInfo:
    group_id: int
    kind: str
    label: str
    spec: dict[str, Any]
    members: tuple[Job, ...]  # every member, cells in cell order, then the composers


def batch_seeds(
    params: GenerationParams, count: int, mode: SeedMode, rng: random.Random | None = None
) -> list[GenerationParams]:
    """`count` copies of `params` with their seeds as `mode` says. A random seed is drawn
    here (once for FIXED and INCREMENT), so every job's seed is known before it is stored;
    a variation seed (A1111's subseed) is drawn once and counts up in INCREMENT, as
    A1111's batch does."""
    if not 1 <= count <= MAX_BATCH:
        raise InvalidParameters(f"batch count must be between 1 and {MAX_BATCH}, not {count}")
    rng = rng or random.SystemRandom()
    if mode is SeedMode.RANDOM and params.seed == RANDOM_SEED:
        return [params.with_concrete_seed(rng) for _ in range(count)]
    first = params.with_concrete_seed(rng)
    if mode is SeedMode.INCREMENT:
        return [_counted(first, i) for i in range(count)]
    if mode is SeedMode.RANDOM:  # a fixed seed given, random asked: the first keeps it
        rest = [replace(params, seed=RANDOM_SEED).with_concrete_seed(rng) for _ in range(1, count)]
        return [first, *rest]
    return [first] * count


def _counted(params: GenerationParams, i: int) -> GenerationParams:
    seed = (params.seed + i) % (MAX_SEED + 1)
    if params.variation_strength > 0:
        variation = (params.variation_seed + i) % (MAX_SEED + 1)
        return replace(params, seed=seed, variation_seed=variation)
    return replace(params, seed=seed)


def submit_batch(
    queue: JobQueue,
    params: GenerationParams,
    count: int,
    mode: SeedMode = SeedMode.RANDOM,
    *,
    init_png: bytes | None = None,
    parents: Sequence[int] = (),
    priority: int = 0,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    source: str = "user",
    check: Check | None = None,
    label: str = "",
) -> Group:
    """`count` jobs of `params` as one group (seeds as `mode` says), in one transaction."""
    batch = batch_seeds(params.validated(), count, mode)
    return submit_members(
        queue, batch, BATCH, label or _batch_label(params, count), init_png=init_png,
        parents=parents, priority=priority, max_attempts=max_attempts, source=source,
        check=check,
    )  # fmt: skip


def submit_members(
    queue: JobQueue,
    batch: Sequence[GenerationParams],
    kind: str,
    label: str,
    *,
    spec: dict[str, Any] | None = None,
    composer: GenerationParams | None = None,
    init_png: bytes | None = None,
    parents: Sequence[int] = (),
    priority: int = 0,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    source: str = "user",
    check: Check | None = None,
    key: RequestKey | None = None,
    with_jobs: StoredHook | None = None,
) -> Group:
    """Store `batch` as the cells of a new group (and `composer` waiting for all of them),
    having checked every job first: all are stored, or none. `key` (an Idempotency-Key)
    and `with_jobs` (rows stored with the jobs): see `JobQueue.submit_keyed`."""
    if not batch:
        raise InvalidParameters("a group needs at least one job")
    if len(batch) > MAX_BATCH:
        raise InvalidParameters(f"a group has at most {MAX_BATCH} jobs, not {len(batch)}")
    for params in batch:
        checked = params.validated()
        if check is not None:
            check(checked)
    cells = NewJobs(
        batch, parents=parents, inputs=RunInputs(init_image=init_png), priority=priority,
        max_attempts=max_attempts, source=source,
    )  # fmt: skip
    then = None
    if composer is not None:
        then = NewJobs([composer], priority=priority, max_attempts=max_attempts, source=source)
    new_group = NewGroup(kind, label, json.dumps(spec) if spec is not None else "")
    stored = queue.submit_group(new_group, cells, then, key=key, with_jobs=with_jobs)
    composers = stored.then
    return Group(stored.group_id, tuple(stored.jobs), composers[0] if composers else None,
                 replayed=stored.replayed)  # fmt: skip


def _batch_label(params: GenerationParams, count: int) -> str:
    prompt = params.prompt if len(params.prompt) <= 40 else params.prompt[:39] + "…"
    return f"{count} of {prompt!r}"


def submit_dynamic(
    queue: JobQueue,
    params: GenerationParams,
    count: int,
    mode: SeedMode,
    wildcards: Path | None,
    *,
    combinatorial: bool = False,
    init_png: bytes | None = None,
    parents: Sequence[int] = (),
    priority: int = 0,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    source: str = "user",
    check: Check | None = None,
    key: RequestKey | None = None,
    with_jobs: StoredHook | None = None,
) -> Group:
    """A prompt with wildcards as a group: `count` jobs, each expanded with its own seed,
    or (`combinatorial`) one job per combination, seeds as `mode` says."""
    batch = expand_prompts(params.validated(), count, mode, wildcards, combinatorial=combinatorial)
    kind = WILDCARDS if has_dynamic_syntax(params.prompt) else BATCH
    return submit_members(
        queue, batch, kind, _batch_label(params, len(batch)), init_png=init_png,
        parents=parents, priority=priority, max_attempts=max_attempts, source=source,
        check=check, key=key, with_jobs=with_jobs,
    )  # fmt: skip


def submit_grid(
    queue: JobQueue,
    base: GenerationParams,
    spec: GridSpec,
    *,
    wildcards: Path | None = None,
    init_png: bytes | None = None,
    priority: int = 0,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    source: str = "user",
    check: Check | None = None,
    parents: Sequence[int] = (),
    key: RequestKey | None = None,
    with_jobs: StoredHook | None = None,
) -> Group:
    """An X/Y/Z plot: one job per cell and the grid's composing job, waiting for every
    cell to be settled, in one transaction. The seed is fixed once for every cell (unless
    an axis varies it); a value an axis cannot take is refused naming the axis."""
    base = base.validated().with_concrete_seed()
    cells = grid_cells(base, spec, check)
    if has_dynamic_syntax(base.prompt):
        cells = [
            replace(c, prompt=expand_random(c.prompt, c.seed, wildcards), prompt_template=c.prompt)
            for c in cells
        ]
    label = f"grid {describe(spec)} of {base.prompt[:40]!r}"
    return submit_members(
        queue, cells, GRID, label, spec=spec.to_dict(), composer=composer_params(base),
        init_png=init_png, parents=parents, priority=priority, max_attempts=max_attempts,
        source=source, key=key, with_jobs=with_jobs,
    )  # fmt: skip


def expand_prompts(
    params: GenerationParams,
    count: int,
    mode: SeedMode,
    wildcards: Path | None,
    *,
    combinatorial: bool = False,
    rng: random.Random | None = None,
) -> list[GenerationParams]:
    """The jobs of one dynamic prompt, its template kept beside each expanded prompt."""
    template = params.prompt
    if not has_dynamic_syntax(template):
        return batch_seeds(params, count, mode, rng)
    if combinatorial:
        prompts = expand_all(template, wildcards, limit=MAX_BATCH)
        seeded = batch_seeds(params, len(prompts), mode, rng)
        return [
            replace(p, prompt=prompt, prompt_template=template)
            for p, prompt in zip(seeded, prompts, strict=True)
        ]
    return [
        replace(p, prompt=expand_random(template, p.seed, wildcards), prompt_template=template)
        for p in batch_seeds(params, count, mode, rng)
    ]


# --- reading ---------------------------------------------------------------------------------


def group_info(queue: JobQueue, group_id: int) -> GroupInfo:
    members_query = (
        select(JOB)
        .where(JOB.c.group_id == group_id)
        .order_by(JOB.c.group_cell.is_(None), JOB.c.group_cell, JOB.c.id)
    )
    with queue.db.read() as conn:
        row = conn.execute(select(JOB_GROUP).where(JOB_GROUP.c.id == group_id)).first()
        if row is None:
            raise GroupNotFound(group_id)
        members = [Job.model_validate(m._mapping) for m in conn.execute(members_query)]
    spec = json.loads(row.spec) if row.spec else {}
    return GroupInfo(group_id, row.kind, row.label, spec, tuple(members))


def group_of(queue: JobQueue, job_id: int) -> int:
    """The group a job belongs to; `GroupNotFound`-like refusal for a lone job."""
    group_id = queue.get(job_id).group_id
    if group_id is None:
        raise InvalidParameters(f"job {job_id} is not part of a group")
    return group_id


def newest_members(info: GroupInfo) -> list[Job]:
    """The newest job of each cell and the newest composer: what the group is now."""
    newest: dict[int | None, Job] = {}
    for job in info.members:
        key = job.group_cell
        if key not in newest or (job.id or 0) > (newest[key].id or 0):
            newest[key] = job
    return [newest[key] for key in sorted(newest, key=lambda k: (k is None, k or 0))]


# --- group actions ---------------------------------------------------------------------------


_EVENTS = {
    GroupAction.PAUSE: JobEvent.PAUSE,
    GroupAction.RESUME: JobEvent.RESUME,
    GroupAction.CANCEL: JobEvent.CANCEL,
    GroupAction.RETRY: JobEvent.RETRY,
}


def act_on_group(
    queue: JobQueue, group_id: int, action: GroupAction, *, source: str = "user"
) -> list[TransitionRecord]:
    """Pause, resume, cancel or retry every member the action applies to, in one
    transaction through the table. Cancel takes a grid's composer first, so cancelling
    a grid does not compose a grid of placeholders. Returns what moved."""
    info = group_info(queue, group_id)
    members = newest_members(info)
    if action is GroupAction.CANCEL:
        members.sort(key=lambda job: job.group_cell is not None)  # composers first
    ids = [job.id or 0 for job in members]
    changes = {"not_before": None, "given_up": False} if action is GroupAction.RETRY else None
    message = f"{action.value} group {group_id}"
    return queue.fire_all(ids, _EVENTS[action], source=source, message=message, changes=changes)


def retry_member(queue: JobQueue, job_id: int, *, source: str = "user") -> int:
    """Retry one member: RETRY a failed or timed-out one (same job); re-run a cancelled or
    finished one into its cell (a new job, which its grid then recomposes). Returns the id
    of the job that will run."""
    job = queue.get(job_id)
    status = JobStatus(job.status)
    if status in (JobStatus.FAILED, JobStatus.TIMEOUT):
        queue.retry(job_id, source=source)
        return job_id
    if status.is_terminal and job.group_id is not None:
        return queue.rerun(job_id, source=source)
    queue.retry(job_id, source=source)  # refused by the table, with its own message
    return job_id


# --- keeping a grid up to date ---------------------------------------------------------------


def recompose_if_stale(queue: JobQueue, job_id: int, *, source: str = SOURCE) -> int | None:
    """After a cell succeeded: if its grid was already composed without it (the cell was
    retried or re-run after the grid was made), queue the grid again (a re-run of the
    composer, waiting for the newest cells). Returns the new composer's id, or None."""
    # One read (every job's SUCCESS asks): the cell's grid's newest composer, if any.
    with queue.db.read() as conn:
        row = conn.execute(_NEWEST_COMPOSER_OF_CELL, {"job_id": job_id}).first()
    if row is None:
        return None  # no such job, not a succeeded cell, or its group has no grid
    cell_finished, composer_id, composer_status, composer_finished = row
    if composer_status != JobStatus.SUCCESS.value:
        return None  # it has yet to compose (it will read the newest cells)
    if (composer_finished or 0) >= (cell_finished or 0):
        return None
    return _recompose(queue, int(composer_id), source=source)


def _recompose(queue: JobQueue, composer_id: int, *, source: str) -> int | None:
    """Queue the grid again after its stale composer `composer_id`, once: a cell's success
    and the reconciliation (or two cells finishing together) may both find it stale at the
    same moment, and the second must not queue a second grid. The key makes the re-run once
    per stale composer on both backends (`request_keys`); None when another got there."""
    key = internal_key(f"recompose after grid job {composer_id}")
    stored = queue.rerun_keyed(composer_id, source=source, key=key)
    return None if stored.replayed else stored.jobs[0]


_CELL, _COMPOSER = JOB.alias("cell"), JOB.alias("composer")
_NEWEST_COMPOSER_OF_CELL = (
    select(_CELL.c.finished_at, _COMPOSER.c.id, _COMPOSER.c.status, _COMPOSER.c.finished_at)
    .join(_COMPOSER, and_(_COMPOSER.c.group_id == _CELL.c.group_id, _COMPOSER.c.kind == KIND_GRID))
    .where(
        _CELL.c.id == bindparam("job_id"),
        _CELL.c.group_cell.is_not(None),
        _CELL.c.status == JobStatus.SUCCESS.value,
    )
    .order_by(_COMPOSER.c.id.desc())
    .limit(1)
)


def recompose_stale(queue: JobQueue, *, source: str = SOURCE) -> list[int]:
    """Every grid composed before one of its newest cells succeeded, queued again: the
    reconciliation of `recompose_if_stale`, so a crash between the two commits loses no
    recomposition."""
    composed = (
        select(JOB.c.group_id, func.max(JOB.c.id))
        .where(JOB.c.kind == KIND_GRID, JOB.c.group_id.is_not(None))
        .group_by(JOB.c.group_id)
    )
    new = []
    with queue.db.read() as conn:
        newest = [(int(g), int(j)) for g, j in conn.execute(composed)]
    for group_id, composer_id in newest:
        composer = queue.get(composer_id)
        if composer.status != JobStatus.SUCCESS:
            continue
        for cell in latest_cells(queue.db, group_id):
            if (new_id := recompose_if_stale(queue, cell, source=source)) is not None:
                new.append(new_id)
                break
    return new
