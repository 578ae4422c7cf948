"""The queue's hot-path statements, written once in Core and compiled once per database.

Portable SQL (no SQLite-only syntax): the same statements serve SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BindParameter,
    and_,
    bindparam,
    case,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    true,
    update,
)

from app.engine.jobs.affinity import CLAIM_WINDOW, MAX_HELD, MAX_PEERS
from app.engine.jobs.states import JobEvent, JobStatus
from app.models.db import Database, Prepared
from app.models.tables import JOB, MAX_JOB_ID, TRANSITION, WORKER

HISTORY_COLUMNS = (
    "job_id", "attempt", "from_status", "to_status", "event", "source", "message", "at",
)  # fmt: skip
RUNNING = tuple(status.value for status in JobStatus if status.is_running)
# The columns of the row PostgreSQL's claim returns (`affinity_claim_statement`), in order:
# named here, as asking the driver (`cursor.description`) built an object per column at
# each claim (0.15 ms of the claimer's CPU).
CLAIM_COLUMNS = (*(column.name for column in JOB.c), "chosen_id")
# `status = 'PENDING'` as the queued jobs' partial index says it (`tables.QUEUED_ONLY`).
_QUEUED = JOB.c.status == literal_column(f"'{JobStatus.PENDING.value}'")


class QueueStatements:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._updates: dict[frozenset[str], Prepared] = {}
        self._inserts: dict[frozenset[str], Prepared] = {}
        # Compiled once per process and dialect (`prepare_once`): the same for every store.
        self.snapshot = db.prepare_once(
            "queue.snapshot",
            lambda: select(
                JOB.c.status, JOB.c.version, JOB.c.attempt, JOB.c.worker_id, JOB.c.updated_at
            ).where(JOB.c.id == bindparam("job_id")),
        )
        self.insert_history = db.prepare_once(
            "queue.insert_history", lambda: insert(TRANSITION), HISTORY_COLUMNS
        )
        # SQLite's claim: the choice, the taking, the passes (see `affinity_choice_statement`).
        self.choose_next = db.prepare_once("queue.choose_next", affinity_choice_statement)
        self.take_chosen = db.prepare_once("queue.take_chosen", take_chosen_statement)
        self.pass_over = db.prepare_once("queue.pass_over", pass_over_statement)
        # PostgreSQL's claim is one statement that writes its own history row too.
        self.claim_next_with_history = (
            db.prepare_once("queue.claim_next_with_history", affinity_claim_statement)
            if db.engine.dialect.name == "postgresql"
            else None
        )
        self.claim_job = db.prepare_once("queue.claim_job", lambda: _claim_statement(only_job=True))
        self.peer_models = db.prepare_once(
            "queue.peer_models",
            lambda: select(WORKER.c.models).where(
                WORKER.c.id != bindparam("worker_id"),
                WORKER.c.last_seen_at >= bindparam("seen_since"),
                WORKER.c.state != "exited",
                WORKER.c.models.is_not(None),
            ),
        )
        # The models a claimer holds, in its worker row (`JobQueue.claim(row_models=...)`).
        self.worker_models = db.prepare_once(
            "queue.worker_models",
            lambda: (
                update(WORKER)
                .where(WORKER.c.id == bindparam("worker_id"))
                .values(models=bindparam("models"), last_seen_at=bindparam("last_seen_at"))
            ),
        )
        self.heartbeat = self._touch(("heartbeat_at",))
        self.progress = self._touch(("heartbeat_at", "progress_step", "progress_total"))

    def conditional_update(self, columns: frozenset[str]) -> Prepared:
        """`UPDATE job SET <columns> WHERE id = :job_id AND status = :expected_status AND
        version = :expected_version`: zero rows means somebody moved the job first."""
        prepared = self._updates.get(columns)
        if prepared is None:

            def statement() -> Any:
                return (
                    update(JOB)
                    .where(
                        JOB.c.id == bindparam("job_id"),
                        JOB.c.status == bindparam("expected_status"),
                        JOB.c.version == bindparam("expected_version"),
                    )
                    .values({name: bindparam(name) for name in sorted(columns)})
                )

            name = "queue.conditional_update " + ",".join(sorted(columns))
            prepared = self._updates[columns] = self._db.prepare_once(name, statement)
        return prepared

    def insert_job(self, columns: frozenset[str]) -> Prepared:
        prepared = self._inserts.get(columns)
        if prepared is None:
            prepared = self._inserts[columns] = self._db.prepare_once(
                "queue.insert_job", lambda: insert(JOB).returning(JOB.c.id), sorted(columns)
            )
        return prepared

    def _touch(self, columns: tuple[str, ...]) -> Prepared:
        """Liveness and progress: only the holding worker, only while the job runs."""

        def statement() -> Any:
            return (
                update(JOB)
                .where(
                    JOB.c.id == bindparam("job_id"),
                    JOB.c.worker_id == bindparam("worker_id"),
                    # OR of equalities, not IN: IN's expanding parameter needs Core's execution.
                    or_(*(JOB.c.status == status for status in RUNNING)),
                )
                .values({name: bindparam(name) for name in columns})
            )

        return self._db.prepare_once("queue.touch " + ",".join(columns), statement)


def _claim_statement(*, only_job: bool) -> Any:
    """START the next due PENDING job in one statement, so two workers never hold one job.

    The outer `status = 'PENDING'` re-checks the row the subquery picked: on a database
    without SQLite's single writer, a concurrent claim makes this update zero rows.
    """
    pending = JobStatus.PENDING.value
    now: BindParameter[float] = bindparam("now")
    candidates = select(JOB.c.id).where(
        JOB.c.status == pending, or_(JOB.c.not_before.is_(None), JOB.c.not_before <= now)
    )
    if only_job:
        candidates = candidates.where(JOB.c.id == bindparam("job_id"))
    # PostgreSQL: a row another claim has locked is skipped, not waited for (SQLite's single
    # writer needs no such clause, and its compiler leaves it out).
    due = (
        candidates.order_by(JOB.c.priority.desc(), JOB.c.id)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    return (
        update(JOB)
        .where(JOB.c.id == due, JOB.c.status == pending)
        .values(
            status=JobStatus.PROCESSING.value,
            version=JOB.c.version + 1,
            worker_id=bindparam("worker_id"),
            heartbeat_at=now,
            started_at=not_before_last_change(now),
            updated_at=not_before_last_change(now),
            not_before=None,
            progress_step=0,
        )
        .returning(*JOB.c)
    )


def not_before_last_change(now: Any) -> Any:
    """`now`, or the job's last change if that is later: on a shared queue each process
    reads the database server's time through its own estimate (`StoreClock`), which can
    disagree by a round trip, and a job's timeline must never run backwards."""
    return case((JOB.c.updated_at > now, JOB.c.updated_at), else_=now)


def _affinity_choice() -> tuple[Any, Any]:
    """The affinity rule's choice (`app.engine.jobs.affinity`) as CTEs: (`chosen`, one row
    at most: the job to take, `id`, and its priority, `priority`, the top one; `candidates`,
    the window it was chosen from). Among the candidates (the highest priority) up to the
    oldest one at its fairness bound, less those left to another worker: the oldest for a
    held model, else the model under the most pressure, then age."""
    now: BindParameter[float] = bindparam("now")
    max_wait: BindParameter[float] = bindparam("max_wait_s")
    max_skips: BindParameter[int] = bindparam("max_skips")
    held: list[BindParameter[str]] = [bindparam(f"held_{i}") for i in range(MAX_HELD)]
    peers: list[BindParameter[str]] = [bindparam(f"peer_{i}") for i in range(MAX_PEERS)]
    # NULL padding never matches: `model IN ('a', NULL)` is NULL, not true, for 'b'.
    mine = case((JOB.c.model.in_(held), 1), else_=0)
    waited = now - func.coalesce(JOB.c.not_before, JOB.c.updated_at)
    at_bound = or_(
        JOB.c.passed_over >= max_skips,
        and_(JOB.c.passed_over_at.is_not(None), now - JOB.c.passed_over_at >= max_wait),
    )
    # A model another live worker holds is left to it (it is passed over all the same),
    # until its job waited out the bound or reached it: then anyone may take it.
    left_to_peer = and_(JOB.c.model.in_(peers), waited < max_wait, ~at_bound)
    # The first due jobs in the order they go, highest priority first: only the queued
    # jobs' index (`ix_job_queue`) gives that order, so no plan reads the claimed or
    # finished jobs before them (ordered by id alone, with the priority a condition,
    # PostgreSQL walked the primary key from the oldest job once its statistics said most
    # jobs were queued: a claim cost 17 ms after 3,000 of 10,000, not 0.3).
    window = (
        select(JOB.c.id, JOB.c.model, JOB.c.priority)
        .add_columns(
            mine.label("mine"),
            waited.label("waited"),
            case((at_bound, 1), else_=0).label("at_bound"),
            case((left_to_peer, 1), else_=0).label("left_to_peer"),
        )
        .where(_due(now))
        .order_by(JOB.c.priority.desc(), JOB.c.id)
        .limit(CLAIM_WINDOW)  # the oldest only: a claim's cost does not grow with the queue
        .cte("queue_window")
        .prefix_with("MATERIALIZED")
    )
    # The top priority's jobs: a prefix of the window, the oldest CLAIM_WINDOW of them.
    top = select(func.max(window.c.priority)).scalar_subquery()
    candidates = select(window).where(window.c.priority == top).cte("candidates")
    first_at_bound = func.coalesce(
        select(func.min(candidates.c.id)).where(candidates.c.at_bound == 1).scalar_subquery(),
        MAX_JOB_ID,
    )
    # Nobody younger than a job at its bound may go before it.
    takeable = (
        select(candidates)
        .where(candidates.c.id <= first_at_bound, candidates.c.left_to_peer == 0)
        .cte("takeable")
    )
    # Each job with its model's pressure, in one pass over the takeable jobs (a join to a
    # per-model aggregate ran the aggregate again for every takeable job on PostgreSQL).
    model = takeable.c.model
    count = func.count().over(partition_by=model)
    pressure = count + func.sum(takeable.c.waited).over(partition_by=model) / max_wait
    weighed = select(
        takeable.c.id, takeable.c.priority, takeable.c.mine, pressure.label("pressure")
    ).cte("weighed")
    held_first = weighed.c.mine == 1
    chosen = (
        select(weighed.c.id, weighed.c.priority)
        .order_by(
            weighed.c.mine.desc(),
            case((held_first, literal(0.0)), else_=weighed.c.pressure).desc(),
            weighed.c.id,
        )
        .limit(1)
        .cte("chosen")
        .prefix_with("MATERIALIZED")  # once: the statements after ask for it several times
    )
    return chosen, candidates


def _due(now: Any) -> Any:
    """Queued and due. The status is written into the SQL, not bound, so that the planner
    may read the queued jobs' partial index (`ix_job_queue`)."""
    return and_(_QUEUED, or_(JOB.c.not_before.is_(None), JOB.c.not_before <= now))


def _taking(job_id: Any) -> Any:
    """`UPDATE job SET <started by the claimer> WHERE id = <job_id> AND status = 'PENDING'`:
    the chosen job, taken (its counters reset), returning its row."""
    now: BindParameter[float] = bindparam("now")
    return (
        update(JOB)
        .where(JOB.c.id == job_id, JOB.c.status == JobStatus.PENDING.value)
        .values(
            status=JobStatus.PROCESSING.value,
            version=JOB.c.version + 1,
            worker_id=bindparam("worker_id"),
            heartbeat_at=now,
            started_at=not_before_last_change(now),
            updated_at=not_before_last_change(now),
            not_before=None,
            progress_step=0,
            passed_over=0,
            passed_over_at=None,
        )
    )


def _passing(job_id: Any, priority: Any) -> Any:
    """`UPDATE job SET passed_over = passed_over + 1 ...` on every job the claim of `job_id`
    passes over: the due PENDING jobs of its priority (the top one) older than it, all of
    them candidates, as it is one. Only the counters are set, so the rows' index entries
    are left alone (SQLite rewrites an index's entry whenever the UPDATE sets one of its
    columns, even to the value it had)."""
    now: BindParameter[float] = bindparam("now")
    return (
        update(JOB).where(_due(now), JOB.c.priority == priority, JOB.c.id < job_id).values(_PASSED)
    )


def _passing_candidates(candidates: Any, job_id: Any) -> Any:
    """`_passing` where the window is at hand (PostgreSQL's one statement): the candidates
    older than `job_id`, which are all the jobs it passes over, looked up by their ids, so
    no plan walks the queue for them; each re-checked (a concurrent cancel)."""
    now: BindParameter[float] = bindparam("now")
    older = select(candidates.c.id).where(candidates.c.id < job_id)
    return update(JOB).where(JOB.c.id.in_(older), _due(now)).values(_PASSED)


# A pass: one more on the counter, the time of the first kept.
_PASSED = {
    "passed_over": JOB.c.passed_over + 1,
    "passed_over_at": func.coalesce(JOB.c.passed_over_at, bindparam("now")),
}


def affinity_choice_statement() -> Any:
    """SQLite: the job a worker holding some models should take (the rule:
    `app.engine.jobs.affinity`), as one row (`id`, `priority`), none when nothing is due.
    Run under the write lock, which SQLite's single writer holds from BEGIN, followed by
    `take_chosen_statement` and `pass_over_statement`: one UPDATE of the taken row and one
    of the counters of the rows it passes over, where a single UPDATE of both set every
    column on each passed row too (and, for the status, rewrote their index entries) and
    returned each passed row to the client."""
    chosen, _ = _affinity_choice()
    return select(chosen.c.id, chosen.c.priority)


def take_chosen_statement() -> Any:
    """SQLite: take job `job_id`, chosen under the same write lock: its row."""
    return _taking(bindparam("job_id")).returning(*JOB.c)


def pass_over_statement() -> Any:
    """SQLite: count one more pass on every job that taking `job_id` (of priority
    `priority`) passed over; the same transaction, before anything else could move them."""
    return _passing(bindparam("job_id"), bindparam("priority"))


def affinity_claim_statement() -> Any:
    """PostgreSQL: START the due PENDING job a worker holding some models should take, in
    one statement that also writes its START history row, so the claim transaction needs
    nothing from its client between the claims' lock and the commit and is sent with both:
    the lock is held for the server's work only, never while a client process waits for a
    core. (An `INSERT` or `UPDATE` in a `WITH`, which SQLite has not.)

    The choice is `_affinity_choice`'s. Two claims never interleave: a lock the claim's
    transaction takes first (a claim is a read of the whole candidate set, which row locks
    cannot guard). The chosen row is locked first (`FOR UPDATE`, re-read if a transition
    moved it since the statement began); if it moved, nothing changes and the one row
    returned is all NULL but `chosen_id`: claim again. Otherwise the one row is the taken
    job's, with `chosen_id`. One UPDATE takes the chosen row, another counts one more pass
    on every older candidate (only those counters), so the bound is kept by the statement
    that passes a job over; the `status = 'PENDING'` in each re-checks its rows against a
    concurrent transition (a cancel).
    """
    pending = JobStatus.PENDING.value
    started = JobStatus.PROCESSING.value
    chosen, candidates = _affinity_choice()
    chosen_id = select(chosen.c.id).scalar_subquery()
    # Locked before anything is written: a chosen job a transition moved is left, and with
    # it every pass (the claim is made again).
    locked = (
        select(JOB.c.id)
        .where(JOB.c.id == chosen_id, JOB.c.status == pending)
        .with_for_update()
        .cte("locked")
    )
    locked_id = select(locked.c.id).scalar_subquery()
    claimed = _taking(locked_id).returning(*JOB.c).cte("claimed")
    passes = _passing_candidates(candidates, locked_id)
    history = insert(TRANSITION).from_select(
        HISTORY_COLUMNS,
        select(
            claimed.c.id, claimed.c.attempt, literal(pending), literal(started),
            literal(JobEvent.START.value), bindparam("source"), bindparam("message"),
            claimed.c.updated_at,
        ),
    )  # fmt: skip
    # One row even when nothing was claimed: `chosen_id` tells a moved job from none due.
    one = select(literal(1).label("one")).subquery("one")
    return (
        select(
            *[claimed.c[name] for name in CLAIM_COLUMNS[:-1]], chosen_id.label(CLAIM_COLUMNS[-1])
        )
        .select_from(one.outerjoin(claimed, true()))
        .add_cte(passes.cte("passes"))
        .add_cte(history.cte("history"))
    )
