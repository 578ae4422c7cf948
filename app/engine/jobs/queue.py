"""The job queue: the one writer of job status.

Every status change goes through `JobQueue.fire`, which asks the transition table
and then does one transaction: a conditional update of the job row (on status and
version) plus one history row. Zero rows updated means somebody else moved the
job first: re-read and decide again, never overwrite.

Writes (submit, fire, claim, heartbeat) run statements written in SQLAlchemy Core and
compiled once (`queue_sql`) straight on the driver: the ORM, and even Core's per-call
execution, cost several times the per-transaction price of SQLite itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection, Row, Update, and_, func, or_, select, update

from app.engine.jobs.affinity import (
    DEFAULT_BOUND,
    MAX_HELD,
    MAX_PEERS,
    AffinityBound,
    model_slots,
)
from app.engine.jobs.changes import ChangeWatcher
from app.engine.jobs.claim_function import (
    ANALYZE_JOBS,
    STATUS_STATISTICS,
    ClaimFunction,
    LoadsTaken,
    claim_function,
)
from app.engine.jobs.clock import StoreClock
from app.engine.jobs.durations import RunningTime, running_time
from app.engine.jobs.graph_sql import GraphStatements, check_inputs, latest_cells, stored_links
from app.engine.jobs.params import KIND_GRID, GenerationParams
from app.engine.jobs.queue_sql import CLAIM_COLUMNS, RUNNING, QueueStatements
from app.engine.jobs.request_keys import Answer, KeyStatements, RequestKey, answer_once
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs
from app.engine.jobs.states import (
    JobEvent,
    JobStatus,
    TransitionNotAllowed,
    is_already_satisfied,
    next_status,
)
from app.errors import EaselError, UserError
from app.models.db import Database, HotTransaction, Prepared
from app.models.tables import JOB, TRANSITION, WORKER, Job, JobNote, JobTransition, stored_job
from app.models.tables import MAX_JOB_ID as MAX_JOB_ID  # the largest id (the server checks it)

log = logging.getLogger(__name__)

# Moves on every machine take it, one at a time (see `_moving`); any fixed number.
MOVES_KEY = 0x45A5E3
# Claims on every machine take it, one at a time (see `queue_sql.affinity_claim_statement`).
CLAIMS_KEY = 0x45A5E4
# A claimer's worker-row models once it has taken a job for the given model (None: as before).
RowModels = Callable[[str], Sequence[str] | None]

MAX_DECIDE_AGAIN = 20
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_PAGE_SIZE = 200
IDS_A_QUERY = 500  # ids in one IN (...): well under every driver's limit of bound parameters
_IS_RUNNING = JOB.c.status.in_(RUNNING)
_ENDINGS = select(JOB.c.id, JOB.c.status, JOB.c.given_up, JOB.c.error_transient)

Clock = Callable[[], float]
# Statuses that give a worker something to do: a job to claim, a run to stop. Only these
# wake listening workers (PostgreSQL NOTIFY); claims and progress, the busy paths, do not.
WAKES_WORKERS = frozenset({JobStatus.PENDING, JobStatus.CANCELLING, JobStatus.PAUSING})


class JobNotFound(UserError, LookupError):
    def __init__(self, job_id: int) -> None:
        super().__init__(f"There is no job {job_id}")
        self.job_id = job_id


class RequestRefused(UserError):
    """A request that makes no sense for this job (e.g. re-running one still queued)."""


class NotHoldingJob(EaselError):
    """A worker reported on a job that is no longer its own (timed out and re-claimed)."""

    def __init__(self, job_id: int, worker_id: str, holder: str | None) -> None:
        super().__init__(f"Job {job_id} is held by {holder or 'no worker'}, not by {worker_id}")


@dataclass(frozen=True)
class TransitionRecord:
    """What `fire` did; `changed` is False for an already-satisfied request."""

    job_id: int
    from_status: JobStatus | None
    to_status: JobStatus
    event: JobEvent
    source: str
    message: str
    attempt: int
    at: float
    changed: bool = True


TransitionListener = Callable[[TransitionRecord], None]


@dataclass(frozen=True)
class NewJobs:
    """Jobs stored together that share their parents, priority and attempts
    (`JobQueue.submit_linked`). `inputs`: the images the parameters name, stored with each
    job (an uploaded init image, the inpaint mask (`mask.prepare_mask`), control and
    reference images); a parent's output is named, never stored."""

    batch: Sequence[GenerationParams]
    parents: Sequence[int] = ()
    inputs: RunInputs = NO_INPUTS
    priority: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    source: str = "user"
    rerun_of: int | None = None
    output_dir: Path | None = None
    # Members of a group (see `groups`): its id, and the first job's cell (the rest count
    # up); `group_cell=None` stores no cell (a grid's composing job).
    group_id: int | None = None
    group_cell: int | None = None
    # The jobs wait for their parents to be settled, not to succeed (a grid's cells).
    settled_parents: bool = False


@dataclass(frozen=True)
class NewGroup:
    """The `job_group` row a group of jobs points at (`JobQueue.submit_group`)."""

    kind: str
    label: str = ""
    spec: str = ""


# What waits for one job of a batch, from its id and stored settings (`submit_linked`).
FollowUpsOf = Callable[[int, GenerationParams], Sequence[NewJobs]]
# More rows that belong with new jobs, written in their submit's transaction (`submit_keyed`).
StoredHook = Callable[[HotTransaction, list[int]], None]


@dataclass(frozen=True)
class StoredJobs:
    """What `submit_keyed` stored, or (`replayed`) what the first request with its key did."""

    jobs: list[int]
    follow_ups: list[int]
    replayed: bool = False


@dataclass(frozen=True)
class StoredGroup:
    """What `submit_group` stored, or (`replayed`) what the first request with its key did."""

    group_id: int
    jobs: list[int]  # the cells, in cell order
    then: list[int]  # the jobs that wait for every cell (a grid's composer)
    replayed: bool = False


@dataclass
class _Snapshot:
    status: JobStatus
    version: int
    attempt: int
    worker_id: str | None
    updated_at: float  # the job's last change: its next one is never stamped earlier


def _the_store_clock() -> float:
    raise AssertionError("replaced by the queue's StoreClock in JobQueue.__post_init__")


@dataclass
class JobQueue:
    db: Database
    # Every time written to or compared with the store: the store's own (see `clock`), so
    # machines whose clocks disagree still agree on heartbeats, backoffs and timelines.
    # Tests may give a clock of their own.
    clock: Clock = _the_store_clock
    listeners: list[TransitionListener] = field(default_factory=list)
    # How far model affinity may delay a job (the settings' affinity_max_wait_s and
    # affinity_max_skips; see `affinity`).
    affinity: AffinityBound = DEFAULT_BOUND
    _sql: QueueStatements = field(init=False, repr=False)
    _graph: GraphStatements = field(init=False, repr=False)
    _keys: KeyStatements = field(init=False, repr=False)
    _statistics_checked: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.clock is _the_store_clock:
            self.clock = StoreClock(self.db)
        self._sql = QueueStatements(self.db)
        self._graph = GraphStatements(self.db)
        self._keys = KeyStatements(self.db)

    # --- the store it lives in, as a window sees it -------------------------------------------

    @property
    def read_only(self) -> bool:
        """Opened on a data folder this process cannot write: reads work, writes are refused."""
        return self.db.read_only

    @property
    def folder(self) -> Path | None:
        """The data folder of a SQLite store; None for a database server."""
        return self.db.path.parent if self.db.path is not None else None

    @property
    def shares_files(self) -> bool:
        """Images live in the database too: other machines' images are fetched from it."""
        return self.db.shares_files

    @property
    def ids_in_commit_order(self) -> bool:
        """Whether history ids are handed out in commit order (SQLite: its write lock), or
        before commit (PostgreSQL), so that a reader may see a gap fill later."""
        return self.db.is_sqlite

    def change_watcher(self) -> ChangeWatcher:
        """A cheap "has anyone committed?" for polling; the caller closes it."""
        return ChangeWatcher(self.db)

    # --- submitting --------------------------------------------------------------------------

    def submit(
        self,
        params: GenerationParams,
        *,
        priority: int = 0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        source: str = "user",
        rerun_of: int | None = None,
        parents: Sequence[int] = (),
        inputs: RunInputs = NO_INPUTS,
        output_dir: Path | None = None,
    ) -> int:
        """Validate, store as PENDING (or BLOCKED, with `parents`) and return the new id.

        `output_dir`: the folder the image must go to, whichever worker runs the job."""
        [job_id] = self.submit_many(
            [params], priority=priority, max_attempts=max_attempts, source=source,
            rerun_of=rerun_of, parents=parents, inputs=inputs, output_dir=output_dir,
        )  # fmt: skip
        return job_id

    def submit_many(
        self,
        batch: Sequence[GenerationParams],
        *,
        priority: int = 0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        source: str = "user",
        rerun_of: int | None = None,
        parents: Sequence[int] = (),
        inputs: RunInputs = NO_INPUTS,
        output_dir: Path | None = None,
    ) -> list[int]:
        """Submit several jobs in one transaction: all are stored, or (on bad input) none.

        `parents`: every job of the batch waits for these (SUBMIT_AFTER, BLOCKED) and is
        unblocked once all of them succeeded (see `graph`). `inputs`: the images the
        parameters name by digest (`graph_sql.digest`), stored with each job.
        """
        jobs = NewJobs(
            batch, priority=priority, max_attempts=max_attempts, source=source,
            rerun_of=rerun_of, parents=parents, inputs=inputs, output_dir=output_dir,
        )  # fmt: skip
        ids, _follow_up_ids = self.submit_linked(jobs)
        return ids

    def submit_linked(
        self, jobs: NewJobs, follow_ups: FollowUpsOf | None = None
    ) -> tuple[list[int], list[int]]:
        """`jobs`, and after them the jobs that wait for each of them, in one transaction:
        all are stored, or none. `follow_ups(job_id, params)` names what waits for one job
        of the batch, given its id and its stored settings (a random seed made concrete),
        which are not known before the insert. Returns (the batch's ids, the follow-ups').
        """
        stored = self.submit_keyed(jobs, follow_ups)
        return stored.jobs, stored.follow_ups

    def submit_keyed(
        self,
        jobs: NewJobs,
        follow_ups: FollowUpsOf | None = None,
        *,
        key: RequestKey | None = None,
        with_jobs: StoredHook | None = None,
    ) -> StoredJobs:
        """`submit_linked`, once per `key`: a request whose key was seen before stores
        nothing and answers with the jobs the first one made (`replayed`), even when the two
        race (see `request_keys`). `with_jobs(tx, ids)`: rows that belong with the new jobs,
        written in the same transaction (the HTTP server's record of who asked)."""
        checked, parents = _checked_batch(jobs)  # bad input opens no transaction
        now = self.clock()
        records: list[TransitionRecord] = []
        follow_up_records: list[TransitionRecord] = []
        with self.db.hot_write() as tx:
            if key is not None and (earlier := self._keys.claim(tx, key, now)) is not None:
                return StoredJobs(earlier.jobs, earlier.follow_ups, replayed=True)
            self._graph.check_parents(tx, parents)
            stored = self._insert_batch(tx, jobs, checked, parents, now)
            records.extend(stored)
            for record, params in zip(stored, checked, strict=True):
                for follower in follow_ups(record.job_id, params) if follow_ups else ():
                    follower_params, follower_parents = _checked_batch(follower)
                    self._graph.check_parents(tx, follower_parents)
                    follow_up_records.extend(
                        self._insert_batch(tx, follower, follower_params, follower_parents, now)
                    )
            ids = [r.job_id for r in records]
            follow_up_ids = [r.job_id for r in follow_up_records]
            if key is not None:
                self._keys.record(tx, key, ids, follow_up_ids)
            if with_jobs is not None:
                with_jobs(tx, [*ids, *follow_up_ids])
        for record in [*records, *follow_up_records]:
            self._notify(record)
        return StoredJobs(ids, follow_up_ids)

    def answer_once(self, key: RequestKey, act: Callable[[], Answer]) -> tuple[Answer, bool]:
        """`act()`'s answer once per Idempotency-Key (see `request_keys.answer_once`)."""
        return answer_once(self.db, self._keys, key, self.clock(), act)

    def submit_group(
        self,
        group: NewGroup,
        cells: NewJobs,
        then: NewJobs | None = None,
        *,
        key: RequestKey | None = None,
        with_jobs: StoredHook | None = None,
    ) -> StoredGroup:
        """A group in one transaction: its `job_group` row, `cells` (cell 0, 1, ... of the
        group) and `then`, jobs of the group that wait for every cell to be settled (a
        grid's composing job). All are stored, or none. `key` and `with_jobs` as in
        `submit_keyed`: a replayed key stores nothing and answers with the first group."""
        checked, parents = _checked_batch(cells)
        waiting = [params.validated() for params in then.batch] if then is not None else []
        now = self.clock()
        with self.db.hot_write() as tx:
            earlier = self._keys.claim(tx, key, now) if key is not None else None
            if earlier is None:
                self._graph.check_parents(tx, parents)
                group_id, records, then_records = self._insert_group(
                    tx, group, replace(cells, batch=checked), parents, then, waiting, now
                )  # fmt: skip
                ids, then_ids = [r.job_id for r in records], [r.job_id for r in then_records]
                if key is not None:
                    self._keys.record(tx, key, ids, then_ids)
                if with_jobs is not None:
                    with_jobs(tx, [*ids, *then_ids])
        if earlier is not None:  # the group the first request with this key made
            group_id = self.get(earlier.jobs[0]).group_id or 0
            return StoredGroup(group_id, earlier.jobs, earlier.follow_ups, replayed=True)
        for record in [*records, *then_records]:
            self._notify(record)
        return StoredGroup(group_id, ids, then_ids)

    def _insert_group(
        self,
        tx: HotTransaction,
        group: NewGroup,
        cells: NewJobs,
        parents: Sequence[int],
        then: NewJobs | None,
        waiting: Sequence[GenerationParams],
        now: float,
    ) -> tuple[int, list[TransitionRecord], list[TransitionRecord]]:
        """The group's row, its cells (`cells.batch`, checked) and the jobs after them."""
        values = {"kind": group.kind, "label": group.label, "spec": group.spec,
                  "created_at": now}  # fmt: skip
        group_id = int(tx.execute(self._graph.insert_group, values).fetchone()[0])
        members = replace(cells, group_id=group_id, group_cell=0)
        records = self._insert_batch(tx, members, cells.batch, parents, now)
        if then is None:
            return group_id, records, []
        cell_ids = [r.job_id for r in records]
        composer = replace(
            then, group_id=group_id, group_cell=None, parents=cell_ids, settled_parents=True
        )  # fmt: skip
        return group_id, records, self._insert_batch(tx, composer, waiting, cell_ids, now)

    def _insert_batch(
        self,
        tx: HotTransaction,
        jobs: NewJobs,
        checked: Sequence[GenerationParams],
        parents: Sequence[int],
        now: float,
    ) -> list[TransitionRecord]:
        event = JobEvent.SUBMIT_AFTER if parents else JobEvent.SUBMIT
        status = next_status(None, None, event)
        message = _submit_message(jobs.rerun_of, parents)
        records = []
        for index, params in enumerate(checked):
            cell = None if jobs.group_cell is None else jobs.group_cell + index
            values = {
                **params.to_dict(),
                "group_id": jobs.group_id, "group_cell": cell,
                "status": status.value, "version": 0, "attempt": 1,
                "max_attempts": jobs.max_attempts, "given_up": False, "priority": jobs.priority,
                "progress_step": 0, "progress_total": params.denoising_steps,
                "created_at": now, "updated_at": now, "rerun_of": jobs.rerun_of,
                "output_dir": str(jobs.output_dir) if jobs.output_dir is not None else None,
            }  # fmt: skip
            insert_job = self._sql.insert_job(frozenset(values))
            job_id = int(tx.execute(insert_job, values).fetchone()[0])
            self._graph.link(tx, job_id, parents, jobs.inputs, settled=jobs.settled_parents)
            record = TransitionRecord(job_id, None, status, event, jobs.source, message, 1, now)
            self._insert_history(tx, record)
            records.append(record)
        return records

    # --- the one writer of status ------------------------------------------------------------

    def fire(
        self,
        job_id: int,
        event: JobEvent,
        *,
        source: str,
        message: str = "",
        worker_id: str | None = None,
        changes: Mapping[str, Any] | None = None,
        only_from: Iterable[JobStatus] | None = None,
    ) -> TransitionRecord:
        """Move a job by `event` through the table, in one transaction with its history row.

        `worker_id`: the event comes from this worker, which must still hold the job.
        `changes`: extra columns set in the same update (output path, error, ...).
        `only_from`: refuse unless the job is in one of these statuses (e.g. the watchdog
        must not time out a job that moved on while it looked).
        Raises `TransitionNotAllowed`, `JobNotFound` or `NotHoldingJob`.
        """
        if event is JobEvent.START:
            # START is only ever the atomic claim; a second path could let two workers in.
            raise TransitionNotAllowed(job_id, None, event, hint="jobs start only by claim()")
        allowed_from = frozenset(only_from) if only_from is not None else None

        def decide(tx: HotTransaction) -> TransitionRecord | None:
            snap = self._snapshot(tx, job_id)
            if worker_id is not None and snap.worker_id != worker_id:
                raise NotHoldingJob(job_id, worker_id, snap.worker_id)
            if allowed_from is not None and snap.status not in allowed_from:
                raise TransitionNotAllowed(job_id, snap.status, event)
            if is_already_satisfied(snap.status, event):
                return TransitionRecord(
                    job_id, snap.status, snap.status, event, source, message,
                    snap.attempt, self.clock(), changed=False,
                )  # fmt: skip
            target = next_status(job_id, snap.status, event)
            if event is JobEvent.UNBLOCK and (waiting := self._graph.waiting_for(tx, job_id)):
                hint = "waiting for " + ", ".join(f"#{parent}" for parent in waiting)
                raise TransitionNotAllowed(job_id, snap.status, event, hint=hint)
            return self._apply(tx, job_id, snap, event, target, source, message, changes)

        for _ in range(MAX_DECIDE_AGAIN):
            record = self.db.in_hot_write(decide)
            if record is not None:
                if record.changed:
                    self._notify(record)
                return record
            log.debug("job %s moved while %s was decided; deciding again", job_id, event)
        raise RuntimeError(f"job {job_id} kept changing; gave up deciding {event.value}")

    def fire_all(
        self,
        job_ids: Sequence[int],
        event: JobEvent,
        *,
        source: str,
        message: str = "",
        changes: Mapping[str, Any] | None = None,
    ) -> list[TransitionRecord]:
        """`event` on every job of `job_ids` whose status the table allows it from, all in
        one transaction (a group's pause, cancel or retry). A job the event does not apply
        to (a finished one, a BLOCKED one for PAUSE) is left as it is, as is one where the
        request is already satisfied; every job that moves gets its history row. Returns
        the records of the jobs that moved."""
        if event in (JobEvent.START, JobEvent.UNBLOCK):
            raise TransitionNotAllowed(0, None, event, hint="not a request for a group")

        def decide(tx: HotTransaction) -> list[TransitionRecord]:
            moved = []
            for job_id in dict.fromkeys(job_ids):
                snap = self._snapshot(tx, job_id)
                if is_already_satisfied(snap.status, event):
                    continue
                try:
                    target = next_status(job_id, snap.status, event)
                except TransitionNotAllowed:
                    continue
                record = self._apply(tx, job_id, snap, event, target, source, message, changes)
                if record is None:
                    raise _MovedMeanwhile(job_id)  # rolls back the whole group: decide again
                moved.append(record)
            return moved

        for _ in range(MAX_DECIDE_AGAIN):
            try:
                records = self.db.in_hot_write(decide)
            except _MovedMeanwhile as moved:
                log.debug("job %s moved while a group %s was decided; again", moved, event)
                continue
            for record in records:
                self._notify(record)
            return records
        raise RuntimeError(f"a group kept changing; gave up deciding {event.value}")

    def _apply(
        self,
        tx: HotTransaction,
        job_id: int,
        snap: _Snapshot,
        event: JobEvent,
        target: JobStatus,
        source: str,
        message: str,
        changes: Mapping[str, Any] | None,
    ) -> TransitionRecord | None:
        now = max(self.clock(), snap.updated_at)  # see queue_sql.not_before_last_change
        attempt = snap.attempt + 1 if event is JobEvent.RETRY else snap.attempt
        values = {
            **_leaving_effects(snap.status),
            **_event_effects(event, target, now),
            **(changes or {}),
            "status": target.value,
            "version": snap.version + 1,
            "attempt": attempt,
            "updated_at": now,
        }
        guard = {
            "job_id": job_id,
            "expected_status": snap.status.value,
            "expected_version": snap.version,
        }
        update_job = self._sql.conditional_update(frozenset(values))
        if tx.execute(update_job, {**values, **guard}).rowcount == 0:
            return None
        record = TransitionRecord(job_id, snap.status, target, event, source, message, attempt, now)
        self._insert_history(tx, record)
        return record

    def _snapshot(self, tx: HotTransaction, job_id: int) -> _Snapshot:
        row = tx.execute(self._sql.snapshot, {"job_id": job_id}).fetchone()
        if row is None:
            raise JobNotFound(job_id)
        status, version, attempt, worker_id, updated_at = row
        return _Snapshot(JobStatus(status), version, attempt, worker_id, float(updated_at))

    def _insert_history(self, tx: HotTransaction, record: TransitionRecord) -> None:
        tx.execute(
            self._sql.insert_history,
            {
                "job_id": record.job_id,
                "attempt": record.attempt,
                "from_status": record.from_status.value if record.from_status else None,
                "to_status": record.to_status.value,
                "event": record.event.value,
                "source": record.source,
                "message": record.message,
                "at": record.at,
            },
        )
        if record.to_status in WAKES_WORKERS:
            tx.notify(f"{record.job_id} {record.to_status.value}")

    def _notify(self, record: TransitionRecord) -> None:
        # Side effects run after the commit; a failing listener never blocks a transition.
        for listener in list(self.listeners):
            try:
                listener(record)
            except Exception:
                log.exception("transition listener %r failed for %s", listener, record)

    # --- claiming ----------------------------------------------------------------------------

    def claim(
        self,
        worker_id: str,
        *,
        source: str = "worker",
        job_id: int | None = None,
        models: Sequence[str] = (),
        row_models: RowModels | None = None,
    ) -> Job | None:
        """START the next due PENDING job for `worker_id`, atomically; None when nothing is due.

        One UPDATE picks and takes the row, so two workers can never hold one job.
        `models`: the models the worker holds (most recently used first): it takes the oldest
        due job for one of them unless that would pass a job over beyond the fairness bound
        (`affinity`), else the model with the most pressure, leaving models other live
        workers hold (the worker table) to them. A higher priority always goes first.
        `job_id`: only that job (`python -m app generate` runs exactly the job it submitted).
        `row_models`: given the taken job's model, the models the worker holds once it has
        taken it (None: its row's list stays): written to its worker row, which peers read
        to leave those models to it. On SQLite in the claim's own commit (a separate write
        would wait for the same write lock and pay a second commit's sync); on PostgreSQL
        a `LoadsTaken` in the claim function's call, any other right after.
        On PostgreSQL the claim is one call of a server-side function (`claim_function`):
        one round trip.
        """
        now = self.clock()
        message = f"claimed by {worker_id}"
        function = self._claim_function() if job_id is None else None
        if function is not None:  # PostgreSQL: one round trip
            claim = ServerClaim(worker_id, now, tuple(models), source, message)
            taken = self._claim_on_server(function, claim, row_models)
        else:
            taken = self._claim_by_statements(
                worker_id, now, source, message, job_id, models, row_models
            )
        if taken is None:
            self.db.trim_journal()  # idle: keep the write-ahead log from outgrowing the data
            return None
        job = stored_job(taken)
        assert job.id is not None and job.worker_id == worker_id
        record = TransitionRecord(
            job.id, JobStatus.PENDING, JobStatus.PROCESSING, JobEvent.START, source, message,
            job.attempt, job.updated_at,
        )  # fmt: skip
        self._notify(record)
        return job

    def _claim_by_statements(
        self,
        worker_id: str,
        now: float,
        source: str,
        message: str,
        job_id: int | None,
        models: Sequence[str],
        row_models: RowModels | None,
    ) -> dict[str, Any] | None:
        """`claim` by statements (SQLite, a claim of one job, PostgreSQL without its claim
        function): the taken job's columns, None when none was taken."""
        params: dict[str, Any] = {"now": now, "worker_id": worker_id}
        if job_id is not None:
            params["job_id"] = job_id
        else:
            bound = self.affinity
            params.update(model_slots("held", tuple(models), MAX_HELD))
            params.update(max_wait_s=bound.max_wait_s, max_skips=bound.max_skips)
        for _ in range(MAX_DECIDE_AGAIN):
            try:
                if job_id is None and self._sql.claim_next_with_history is not None:
                    params.update(source=source, message=message)
                    taken = self._claim_sent_whole(worker_id, models, params)
                    if taken is not None and row_models is not None:
                        self._write_row_models(worker_id, taken, row_models)
                else:
                    taken = self._claim_in_steps(
                        worker_id, models, params, source, message, row_models
                    )
                break
            except _ClaimMissed:
                log.debug("the job a claim chose moved meanwhile; claiming again")
        else:
            return None
        return taken

    def _claim_in_steps(
        self,
        worker_id: str,
        models: Sequence[str],
        params: dict[str, Any],
        source: str,
        message: str,
        row_models: RowModels | None = None,
    ) -> dict[str, Any] | None:
        """The claim, then its history row (and the worker row's models, see `claim`), in
        one transaction: the taken job's columns. A model-aware claim is three statements
        under the claims' lock (SQLite's write lock): the choice, the taking of the chosen
        row, the passes on the rows it passed over (`queue_sql.affinity_choice_statement`)."""
        only_job = "job_id" in params

        if not only_job:
            # Read before the claims' lock (SQLite's write lock), which the others wait for:
            # it guards the queue's rows, not the worker table (a peer's row a moment old is
            # as good).
            with self.db.hot_read() as reading:
                peers = self._peer_models(reading, worker_id, params["now"], set(models))
            params.update(model_slots("peer", peers, MAX_PEERS))

        def take(tx: HotTransaction) -> dict[str, Any] | None:
            if only_job:
                taken = _one_row(tx.execute(self._sql.claim_job, params))
            else:
                tx.serialise(CLAIMS_KEY)  # PostgreSQL: one claim at a time reads the queue
                choice = tx.execute(self._sql.choose_next, params).fetchone()
                if choice is None:
                    return None  # nothing due
                job_id, priority = choice
                chosen = {**params, "job_id": job_id, "priority": priority}
                taken = _one_row(tx.execute(self._sql.take_chosen, chosen))
                if taken is None:  # moved since the choice (a cancel): count no passes
                    raise _ClaimMissed
                tx.execute(self._sql.pass_over, chosen)
            if taken is None:
                return None
            record = TransitionRecord(
                taken["id"], JobStatus.PENDING, JobStatus.PROCESSING, JobEvent.START, source,
                message, taken["attempt"], taken["updated_at"],
            )  # fmt: skip
            self._insert_history(tx, record)
            if row_models is not None:
                self._set_row_models(tx, worker_id, taken, row_models)
            return taken

        # Not synced (SQLite): a claim a power cut undoes leaves the job queued, which is
        # right, as its worker died with the machine; the worker's next commit syncs it.
        return self.db.in_hot_write(take, pipelined=True, synced=False)

    def _set_row_models(
        self, tx: HotTransaction, worker_id: str, taken: dict[str, Any], row_models: RowModels
    ) -> None:
        held = row_models(taken["model"])
        if held is not None:
            values = {"worker_id": worker_id, "models": json.dumps(list(held)),
                      "last_seen_at": taken["updated_at"]}  # fmt: skip
            tx.execute(self._sql.worker_models, values)

    def _write_row_models(
        self, worker_id: str, taken: dict[str, Any], row_models: RowModels
    ) -> None:
        """PostgreSQL: the worker row's models, in a transaction of their own right after
        the claim's (no lock that claims wait for), not pipelined: for one statement and
        its commit, psycopg's pipeline cost 0.1 ms more of the claimer's CPU than the
        second round trip it saves. A failed write is the row's loss, not the claim's: the
        job is taken already."""
        try:
            self.db.in_hot_write(lambda tx: self._set_row_models(tx, worker_id, taken, row_models))
        except EaselError as error:
            log.warning("worker row's models not written: %s", error)

    def _claim_function(self) -> ClaimFunction | None:
        """PostgreSQL's claim function (`claim_function`), created on the store if missing;
        None on SQLite, or where this user may not create it."""
        statement = self._sql.claim_next_with_history
        if statement is None:
            return None
        function = _CLAIM_FUNCTIONS.get(statement.sql)
        if function is None:
            function = claim_function(statement, CLAIM_COLUMNS[:-1], CLAIMS_KEY, MAX_DECIDE_AGAIN)
            _CLAIM_FUNCTIONS[statement.sql] = function
        if not self.db.ensure_function(function.name, function.definition):
            return None
        if not self._statistics_checked:
            self._statistics_checked = True
            with self.db.write() as conn:
                if not conn.execute(STATUS_STATISTICS).scalar_one():
                    conn.execute(ANALYZE_JOBS)
        return function

    def _claim_on_server(
        self, function: ClaimFunction, claim: ServerClaim, row_models: RowModels | None
    ) -> dict[str, Any] | None:
        """PostgreSQL: the claim as one call of the claim function, a transaction of its
        own: one round trip. A `LoadsTaken` worker row is written by the function; any
        other `row_models` right after, as by `_claim_sent_whole`."""
        loads = row_models if isinstance(row_models, LoadsTaken) else None
        bound = self.affinity
        values = {
            "now": claim.now, "worker_id": claim.worker_id,
            "held": list(dict.fromkeys(claim.models)),
            "row_held": list(loads.held) if loads else [], "keep": loads.keep if loads else 0,
            "max_wait_s": bound.max_wait_s, "max_skips": bound.max_skips,
            "seen_since": claim.now - bound.peers_seen_within_s,
            "source": claim.source, "message": claim.message,
        }  # fmt: skip
        rows = self.db.in_hot_write(
            lambda tx: tx.execute(function.call, values).fetchall(), alone=True
        )
        if not rows:
            return None  # nothing due (or the chosen job moved each time it was chosen)
        [row] = rows
        taken = dict(zip(CLAIM_COLUMNS[:-1], row, strict=True))
        if row_models is not None and loads is None:
            self._write_row_models(claim.worker_id, taken, row_models)
        return taken

    def _claim_sent_whole(
        self, worker_id: str, models: Sequence[str], params: dict[str, Any]
    ) -> dict[str, Any] | None:
        """PostgreSQL: the claims' lock, the claim (which writes its history row) and the
        commit go to the server together, in one round trip, so the lock is held for the
        server's work alone (`queue_sql.affinity_claim_statement`)."""
        statement = self._sql.claim_next_with_history
        assert statement is not None

        def send(tx: HotTransaction) -> Any:
            peers = self._peer_models(tx, worker_id, params["now"], set(models))
            params.update(model_slots("peer", peers, MAX_PEERS))
            tx.serialise(CLAIMS_KEY)
            return tx.execute(statement, params)  # its answer comes with the commit's

        cursor = self.db.in_hot_write(send, pipelined=True)
        with self.db.translated_errors():
            rows = cursor.fetchall()
        taken = _taken_row(CLAIM_COLUMNS, rows)
        if taken is None and rows and rows[0][-1] is not None:  # its last column: chosen_id
            raise _ClaimMissed  # nothing was written: the chosen job moved meanwhile
        return taken

    def _peer_models(
        self, tx: HotTransaction, worker_id: str, now: float, mine: set[str]
    ) -> list[str]:
        """The models other live workers hold (the worker table), ours left out."""
        seen_since = now - self.affinity.peers_seen_within_s
        values = {"worker_id": worker_id, "seen_since": seen_since}
        peers: dict[str, None] = {}
        for (listed,) in tx.execute(self._sql.peer_models, values).fetchall():
            for model in _model_list(listed):
                if model not in mine:
                    peers[model] = None
        return list(peers)

    def next_models(self, limit: int = 8) -> list[str]:
        """The models of the due queued jobs, each once, in the order the jobs would go
        without affinity (priority, then age): what a worker may read ahead."""
        due = or_(JOB.c.not_before.is_(None), JOB.c.not_before <= self.clock())
        query = (
            select(JOB.c.model)
            .where(JOB.c.status == JobStatus.PENDING.value, due)
            .order_by(JOB.c.priority.desc(), JOB.c.id)
            .limit(50 * limit)
        )
        with self.db.read() as conn:
            models = list(dict.fromkeys(conn.execute(query).scalars()))
        return models[:limit]

    def models_held(self, *, seen_within_s: float | None = None) -> dict[str, list[str]]:
        """Which live workers hold which model, from the worker table: model -> worker ids,
        the most recent user first. For the window's "loaded" mark on a queued job and for
        the ETA's expected loads (`history.eta`). A row not heard from for `seen_within_s`
        (the affinity bound's, by default) is a worker gone, holding nothing."""
        within = self.affinity.peers_seen_within_s if seen_within_s is None else seen_within_s
        query = select(WORKER.c.id, WORKER.c.models).where(
            WORKER.c.last_seen_at >= self.clock() - within,
            WORKER.c.state != "exited",
            WORKER.c.models.is_not(None),
        )
        held: dict[str, list[str]] = {}
        with self.db.read() as conn:
            for worker_id, listed in conn.execute(query.order_by(WORKER.c.last_seen_at.desc())):
                for model in _model_list(listed):
                    held.setdefault(model, []).append(worker_id)
        return held

    # --- liveness and progress (not transitions) ---------------------------------------------

    def heartbeat(self, job_id: int, worker_id: str) -> bool:
        """Refresh the heartbeat; False when the worker no longer holds a running job."""
        values = {"job_id": job_id, "worker_id": worker_id, "heartbeat_at": self.clock()}
        return self._touch(self._sql.heartbeat, values)

    def report_progress(self, job_id: int, worker_id: str, step: int, total: int) -> bool:
        values = {
            "job_id": job_id, "worker_id": worker_id, "heartbeat_at": self.clock(),
            "progress_step": step, "progress_total": total,
        }  # fmt: skip
        return self._touch(self._sql.progress, values)

    def _touch(self, statement: Prepared, values: dict[str, Any]) -> bool:
        return self.db.in_hot_write(lambda tx: bool(tx.execute(statement, values).rowcount == 1))

    # --- what the user asks for --------------------------------------------------------------

    def cancel(self, job_id: int, *, source: str = "user", message: str = "") -> TransitionRecord:
        return self.fire(job_id, JobEvent.CANCEL, source=source, message=message)

    def pause(self, job_id: int, *, source: str = "user", message: str = "") -> TransitionRecord:
        return self.fire(job_id, JobEvent.PAUSE, source=source, message=message)

    def resume(self, job_id: int, *, source: str = "user", message: str = "") -> TransitionRecord:
        return self.fire(job_id, JobEvent.RESUME, source=source, message=message)

    def retry(
        self,
        job_id: int,
        *,
        source: str = "user",
        message: str = "",
        not_before: float | None = None,
        progress_step: int = 0,
    ) -> TransitionRecord:
        """Run the job again (attempt + 1). `progress_step`: the step its saved checkpoint
        reached (the caller read it), so the row says where it will continue; 0: from the
        start, or unknown."""
        changes = {"not_before": not_before, "given_up": False, "progress_step": progress_step}
        return self.fire(job_id, JobEvent.RETRY, source=source, message=message, changes=changes)

    def rerun(self, job_id: int, *, source: str = "user") -> int:
        """A new job with the same parameters (and seed), pointing back to `job_id`."""
        return self.rerun_keyed(job_id, source=source).jobs[0]

    def rerun_keyed(
        self, job_id: int, *, source: str = "user", key: RequestKey | None = None
    ) -> StoredJobs:
        """`rerun`, once per `key` (as `submit_keyed`): a second re-run with the key stores
        nothing and answers with the first one's job (`replayed`), even when the two race."""
        job = self.get(job_id)
        if not JobStatus(job.status).is_terminal:
            raise RequestRefused(
                f"Job {job_id} is {job.status}; only finished or cancelled jobs can be re-run"
            )
        links = stored_links(self.db, job_id)  # img2img, inpaint: the same inputs again
        parents = links.parents
        if job.kind == KIND_GRID and job.group_id is not None:
            parents = latest_cells(self.db, job.group_id)  # a grid recomposes what is there now
        again = NewJobs(
            [params_of(job)], priority=job.priority, max_attempts=job.max_attempts,
            source=source, rerun_of=job_id, parents=parents, inputs=links.inputs,
            group_id=job.group_id, group_cell=job.group_cell,  # into the same cell
            settled_parents=job.kind == KIND_GRID,
        )  # fmt: skip
        return self.submit_keyed(again, key=key)

    def set_priority(self, job_id: int, priority: int) -> None:
        with self._moving() as conn:
            result = conn.execute(update(JOB).where(JOB.c.id == job_id).values(priority=priority))
            if result.rowcount == 0:
                raise JobNotFound(job_id)

    def raise_priority(self, job_id: int, by: int) -> None:
        """Raise the job's priority by `by` (lower it with a negative `by`): higher runs sooner.

        One relative update, so two at once both count; it waits for a move in progress
        (`_moving`), whose placement was computed from the priority it changes."""
        with self._moving() as conn:
            query = update(JOB).where(JOB.c.id == job_id).values(priority=JOB.c.priority + by)
            if conn.execute(query).rowcount == 0:
                raise JobNotFound(job_id)

    def move(self, job_id: int, *, to: Placement | None = None, before: int | None = None) -> None:
        """Move a PENDING job to the top or bottom of the queue, or just before job `before`.

        Only the moved job's priority changes, to one between its new neighbours (the
        claim order is priority, then age: `queue_sql._claim_statement`). When no whole
        number fits between them, the shorter side of the queue is shifted by 2 in one
        statement; the rest of the queue is never renumbered.

        One transaction reads the order and writes the new priority, guarded on the job
        still being queued at the priority it was seen with; if it moved meanwhile (a
        claim, a cancel), the transaction rolls back and the move is decided again on
        fresh state, as `fire` does. Moves wait for each other (`_moving`), so a move is
        always decided on the order the previous one left."""
        if (to is None) == (before is None):
            raise RequestRefused("Move a job either to the top or bottom, or before another job")
        for _ in range(MAX_DECIDE_AGAIN):
            try:
                with self._moving() as conn:
                    self._move_once(conn, job_id, to, before)
                return
            except _MovedMeanwhile:
                log.debug("job %s changed while its move was decided; deciding again", job_id)
        raise RuntimeError(f"job {job_id} kept changing; gave up moving it")

    @contextmanager
    def _moving(self) -> Iterator[Connection]:
        """A write transaction that no other priority change runs beside. SQLite: its write
        lock, taken at BEGIN, already is one. PostgreSQL reads committed rows, so two moves
        would both see the gap they fill as empty: they take a lock of their own."""
        with self.db.serialised_write(MOVES_KEY) as conn:
            yield conn

    def _move_once(
        self, conn: Connection, job_id: int, to: Placement | None, before: int | None
    ) -> None:
        pending = [(int(i), int(p)) for i, p in conn.execute(_PENDING_IN_CLAIM_ORDER)]
        order = [i for i, _ in pending]
        for asked in (job_id, before):
            if asked is not None and asked not in order:
                self.get(asked)  # JobNotFound for an unknown id
                raise RequestRefused(f"Job {asked} is not queued; only PENDING jobs move")
        if before == job_id:
            return
        seen = dict(pending)[job_id]
        others = [(i, p) for i, p in pending if i != job_id]
        if to is Placement.TOP:
            index = 0
        elif to is Placement.BOTTOM:
            index = len(others)
        else:
            index = [i for i, _ in others].index(before or 0)
        placement = _place(job_id, others, index)
        if placement is None:
            return
        guarded = (
            update(JOB)
            .where(JOB.c.id == job_id, JOB.c.status == JobStatus.PENDING.value)
            .where(JOB.c.priority == seen)
            .values(priority=placement.priority)
        )
        if conn.execute(guarded).rowcount == 0:
            raise _MovedMeanwhile(job_id)  # rolls the transaction back
        if placement.make_room is not None:
            conn.execute(placement.make_room)

    def mark_given_up(self, job_id: int, reason: str, *, version: int | None = None) -> bool:
        """Record that automatic retries stopped (the status stays FAILED or TIMEOUT).

        `version`: only if the job has not moved since it was read (a user may retry it
        meanwhile; that PENDING job must not be marked given up). False if it had moved.
        """
        query = update(JOB).where(JOB.c.id == job_id)
        if version is not None:
            query = query.where(JOB.c.version == version)
        with self.db.write() as conn:
            return conn.execute(query.values(given_up=True, error=reason)).rowcount == 1

    # --- reading -----------------------------------------------------------------------------

    def status_if_held(self, job_id: int, worker_id: str) -> JobStatus | None:
        """The job's status while `worker_id` holds it and it runs; None once it does not
        (gone, settled, or claimed by another worker). The worker's per-step read: two
        columns on the driver cursor, a fraction of `get`."""
        with self.db.hot_read() as tx:
            row = tx.execute(self._sql.snapshot, {"job_id": job_id}).fetchone()
        if row is None:
            return None
        status, _version, _attempt, holder, _updated_at = row
        running = JobStatus(status)
        return running if holder == worker_id and running.is_running else None

    def checkpoint_path_of(self, job_id: int) -> str | None:
        """The checkpoint file the job's row records (None: none, or no such job): one
        column, where `get` builds the whole job (asked at every job's settling)."""
        query = select(JOB.c.checkpoint_path).where(JOB.c.id == job_id)
        with self.db.read() as conn:
            return cast(str | None, conn.execute(query).scalar_one_or_none())

    def get(self, job_id: int) -> Job:
        with self.db.read() as conn:
            job = job_in(conn, job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    def jobs(
        self,
        statuses: Iterable[JobStatus] | None = None,
        *,
        limit: int | None = DEFAULT_PAGE_SIZE,
        before_id: int | None = None,
    ) -> list[Job]:
        """A page of jobs, newest first; page on with `before_id` = the last id seen.

        `limit=None`: every job (the command line's `jobs --all`)."""
        query = select(JOB).order_by(JOB.c.id.desc()).limit(limit)
        if statuses is not None:
            query = query.where(JOB.c.status.in_([s.value for s in statuses]))
        if before_id is not None:
            query = query.where(JOB.c.id < before_id)
        with self.db.read() as conn:
            return [_job(row) for row in conn.execute(query)]

    def count_by_status(self) -> dict[JobStatus, int]:
        query = select(JOB.c.status, func.count()).group_by(JOB.c.status)
        with self.db.read() as conn:
            return {JobStatus(status): int(n) for status, n in conn.execute(query)}

    def notes(self, job_id: int) -> list[JobNote]:
        """The job's notes (a callback's tries...), oldest first: read beside `timeline`."""
        from app.engine.jobs.notes import notes_of

        return notes_of(self.db, job_id)

    def timeline(self, job_id: int) -> list[JobTransition]:
        with self.db.read() as conn:
            transitions = timeline_in(conn, job_id)
        if not transitions:
            self.get(job_id)  # raises JobNotFound for an unknown id
        return transitions

    def running_times(self, job_ids: Sequence[int]) -> dict[int, RunningTime]:
        """Each job's time in PROCESSING over all its attempts, from its history (one
        indexed read for all of them; see `durations.running_time`). Jobs without history
        are left out."""
        if not job_ids:
            return {}
        query = (
            select(TRANSITION.c.job_id, TRANSITION.c.to_status, TRANSITION.c.at)
            .where(TRANSITION.c.job_id.in_(job_ids))
            .order_by(TRANSITION.c.job_id, TRANSITION.c.id)
        )
        history: dict[int, list[tuple[JobStatus, float]]] = {}
        with self.db.read() as conn:
            for job_id, status, at in conn.execute(query):
                history.setdefault(job_id, []).append((JobStatus(status), at))
        return {job_id: running_time(rows) for job_id, rows in history.items()}

    def running_jobs(self) -> list[Job]:
        with self.db.read() as conn:
            return [_job(row) for row in conn.execute(select(JOB).where(_IS_RUNNING))]

    # --- what a server streams and waits for: a few columns, no model per row -----------------

    def running_progress(self, job_id: int | None = None) -> dict[int, tuple[int, int]]:
        """(step, total) of each running job (or of `job_id` alone, if it runs)."""
        query = select(JOB.c.id, JOB.c.progress_step, JOB.c.progress_total).where(_IS_RUNNING)
        if job_id is not None:
            query = query.where(JOB.c.id == job_id)
        with self.db.read() as conn:
            return {int(i): (int(step), int(total)) for i, step, total in conn.execute(query)}

    def transitions_after(self, last_id: int, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` history rows with an id above `last_id`, in id order, as plain dicts
        (an event stream reads them every few milliseconds; see `server/events.py` on gaps)."""
        query = select(TRANSITION).where(TRANSITION.c.id > last_id)
        query = query.order_by(TRANSITION.c.id).limit(limit)
        with self.db.read() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def newest_transition_id(self) -> int:
        """The id of the newest history row (0 for none): where a new event stream starts."""
        query = select(func.coalesce(func.max(TRANSITION.c.id), 0))
        with self.db.read() as conn:
            return int(conn.execute(query).scalar_one())

    def endings(self, job_ids: Iterable[int]) -> list[tuple[int, str, bool, bool | None]]:
        """(id, status, given_up, error_transient) of each of `job_ids` found: what says
        whether a job is over (`retry.is_settled`), in one read for them all."""
        ids = sorted(job_ids)
        found: list[tuple[int, str, bool, bool | None]] = []
        with self.db.read() as conn:
            for start in range(0, len(ids), IDS_A_QUERY):
                chunk = ids[start : start + IDS_A_QUERY]
                rows = conn.execute(_ENDINGS.where(JOB.c.id.in_(chunk)))
                found += [(int(i), status, bool(given_up), transient)
                          for i, status, given_up, transient in rows]  # fmt: skip
        return found


class Placement(Enum):
    TOP = "top"
    BOTTOM = "bottom"


def _one_row(cursor: Any) -> dict[str, Any] | None:
    """The one row a statement returned, by column name; None when it returned none."""
    rows = cursor.fetchall()
    if not rows:
        return None
    [row] = rows
    return dict(zip([column[0] for column in cursor.description], row, strict=True))


def _taken_row(names: Sequence[str], rows: list[tuple[Any, ...]]) -> dict[str, Any] | None:
    """The job PostgreSQL's claim took, of the row it returned (all NULL but `chosen_id`
    when it took none)."""
    status_at = names.index("status")
    taken = [row for row in rows if row[status_at] == JobStatus.PROCESSING.value]
    if not taken:
        return None
    [row] = taken
    return {name: value for name, value in zip(names, row, strict=True) if name != "chosen_id"}


# The claim's order (`queue_sql._claim_statement`): higher priority first, then older.
_PENDING_IN_CLAIM_ORDER = (
    select(JOB.c.id, JOB.c.priority)
    .where(JOB.c.status == JobStatus.PENDING.value)
    .order_by(JOB.c.priority.desc(), JOB.c.id)
)


@dataclass(frozen=True)
class ServerClaim:
    """What a claim by PostgreSQL's claim function asks (see `JobQueue.claim`)."""

    worker_id: str
    now: float
    models: tuple[str, ...]
    source: str
    message: str


# `JobQueue._claim_function`: the claim statement's SQL -> its function (built once a process).
_CLAIM_FUNCTIONS: dict[str, ClaimFunction] = {}


class _ClaimMissed(Exception):
    """The job a claim chose was moved by a concurrent transition: roll back, claim again."""


def _model_list(listed: str | None) -> list[str]:
    """A worker row's `models` (a JSON list of names); a damaged value holds none."""
    try:
        models = json.loads(listed) if listed else []
    except ValueError:
        return []
    return [model for model in models if isinstance(model, str)] if isinstance(models, list) else []


class _MovedMeanwhile(Exception):
    """The job moved between the read and the guarded write of a move: decide again."""


@dataclass(frozen=True)
class _Placement:
    priority: int  # the moved job's new priority
    make_room: Update | None = None  # shifts the shorter side of the queue first, if needed


def _place(job_id: int, others: list[tuple[int, int]], index: int) -> _Placement | None:
    """The priority that puts `job_id` at `index` among `others` (already in claim order);
    None if there is nobody else. May shift the shorter side of the queue to make room."""
    above = others[index - 1] if index > 0 else None
    below = others[index] if index < len(others) else None
    if above is None and below is None:
        return None
    if above is None:
        assert below is not None
        return _Placement(below[1] + 1)
    if below is None:
        return _Placement(above[1] - 1)

    def fits(priority: int) -> bool:
        key = (-priority, job_id)
        return (-above[1], above[0]) < key < (-below[1], below[0])

    for candidate in ((above[1] + below[1]) // 2, above[1], below[1]):
        if fits(candidate):
            return _Placement(candidate)
    pending_other = and_(JOB.c.status == JobStatus.PENDING.value, JOB.c.id != job_id)
    if index <= len(others) - index:  # the part above is the shorter: raise it
        head = or_(
            JOB.c.priority > above[1], and_(JOB.c.priority == above[1], JOB.c.id <= above[0])
        )
        raise_head = update(JOB).where(pending_other, head).values(priority=JOB.c.priority + 2)
        return _Placement(above[1] + 1, raise_head)
    tail = or_(JOB.c.priority < below[1], and_(JOB.c.priority == below[1], JOB.c.id >= below[0]))
    lower_tail = update(JOB).where(pending_other, tail).values(priority=JOB.c.priority - 2)
    return _Placement(below[1] - 1, lower_tail)


def _checked_batch(jobs: NewJobs) -> tuple[list[GenerationParams], list[int]]:
    """The batch's settings validated, random seeds made concrete, and its parents once each;
    raises on bad input before anything is written."""
    checked = [params.validated().with_concrete_seed() for params in jobs.batch]
    parents = list(dict.fromkeys(jobs.parents))
    for params in checked:
        check_inputs(params, parents, jobs.inputs)
    if jobs.max_attempts < 1:
        raise RequestRefused(f"max_attempts must be at least 1, not {jobs.max_attempts}")
    return checked, parents


def params_of(job: Job) -> GenerationParams:
    return GenerationParams(
        prompt=job.prompt, negative_prompt=job.negative_prompt, model=job.model,
        scheduler=job.scheduler, steps=job.steps, cfg=job.cfg, width=job.width,
        height=job.height, seed=job.seed, init_image=job.init_image, strength=job.strength,
        mask=job.mask, mask_blur=job.mask_blur, only_masked=job.only_masked,
        mask_padding=job.mask_padding, control=job.control, reference=job.reference,
        variation_seed=job.variation_seed, variation_strength=job.variation_strength,
        prompt_template=job.prompt_template, kind=job.kind, upscaler=job.upscaler,
        speed=job.speed, speed_threshold=job.speed_threshold, compile=job.compile,
        frames=job.frames, fps=job.fps, scheduler_config=job.scheduler_config,
        edit_images=job.edit_images, last_image=job.last_image,
        image_strength=job.image_strength, last_image_strength=job.last_image_strength,
        last_image_frame=job.last_image_frame,
    )  # fmt: skip


def _submit_message(rerun_of: int | None, parents: Sequence[int]) -> str:
    parts = [f"re-run of job {rerun_of}"] if rerun_of else []
    if parents:
        parts.append("waits for " + ", ".join(f"#{parent}" for parent in parents))
    return "; ".join(parts)


def _leaving_effects(status: JobStatus) -> dict[str, Any]:
    """Columns that belong to the status a job leaves: a pending undo-cancel is a mark on
    the PAUSED its hold made (see `undo`), so any move away ends it, whoever fires it."""
    return {"cancel_after": None} if status is JobStatus.PAUSED else {}


def _event_effects(event: JobEvent, target: JobStatus, now: float) -> dict[str, Any]:
    """Columns an event sets besides the status itself."""
    if target.is_terminal or target in (JobStatus.FAILED, JobStatus.TIMEOUT):
        return {"finished_at": now}
    if event is JobEvent.START:
        return {"heartbeat_at": now, "started_at": now}
    if event is JobEvent.RETRY:
        # A resumed job keeps its progress (it continues from its checkpoint); a retry starts over.
        return {"finished_at": None, "progress_step": 0}
    return {}


def _job(row: Row[Any]) -> Job:
    return Job.model_validate(row._mapping)


def job_in(conn: Connection, job_id: int) -> Job | None:
    """The job, read in the caller's transaction (None: no such job)."""
    row = conn.execute(select(JOB).where(JOB.c.id == job_id)).first()
    return None if row is None else _job(row)


def timeline_in(conn: Connection, job_id: int) -> list[JobTransition]:
    """The job's history, oldest first, read in the caller's transaction."""
    query = select(TRANSITION).where(TRANSITION.c.job_id == job_id).order_by(TRANSITION.c.id)
    return [JobTransition.model_validate(row._mapping) for row in conn.execute(query)]
