"""The queue's hot-path statements, written once in Core and compiled once per database.

Portable SQL (no SQLite-only syntax): the same statements serve SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BindParameter, bindparam, insert, or_, select, update

from app.engine.jobs.states import JobStatus
from app.models.db import Database, Prepared
from app.models.tables import JOB, TRANSITION, Job

HISTORY_COLUMNS = (
    "job_id", "attempt", "from_status", "to_status", "event", "source", "message", "at",
)  # fmt: skip
RUNNING = tuple(status.value for status in JobStatus if status.is_running)


class QueueStatements:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._updates: dict[frozenset[str], Prepared] = {}
        self._inserts: dict[frozenset[str], Prepared] = {}
        self.snapshot = db.prepare(
            select(JOB.c.status, JOB.c.version, JOB.c.attempt, JOB.c.worker_id).where(
                JOB.c.id == bindparam("job_id")
            )
        )
        self.insert_history = db.prepare(insert(TRANSITION), HISTORY_COLUMNS)
        self.claim_next = db.prepare(_claim_statement(only_job=False))
        self.claim_job = db.prepare(_claim_statement(only_job=True))
        self.heartbeat = self._touch(("heartbeat_at",))
        self.progress = self._touch(("heartbeat_at", "progress_step", "progress_total"))

    def conditional_update(self, columns: frozenset[str]) -> Prepared:
        """`UPDATE job SET <columns> WHERE id = :job_id AND status = :expected_status AND
        version = :expected_version`: zero rows means somebody moved the job first."""
        prepared = self._updates.get(columns)
        if prepared is None:
            statement = (
                update(JOB)
                .where(
                    JOB.c.id == bindparam("job_id"),
                    JOB.c.status == bindparam("expected_status"),
                    JOB.c.version == bindparam("expected_version"),
                )
                .values({name: bindparam(name) for name in sorted(columns)})
            )
            prepared = self._updates[columns] = self._db.prepare(statement)
        return prepared

    def insert_job(self, columns: frozenset[str]) -> Prepared:
        prepared = self._inserts.get(columns)
        if prepared is None:
            statement = insert(JOB).returning(JOB.c.id)
            prepared = self._inserts[columns] = self._db.prepare(statement, sorted(columns))
        return prepared

    def _touch(self, columns: tuple[str, ...]) -> Prepared:
        """Liveness and progress: only the holding worker, only while the job runs."""
        statement = (
            update(JOB)
            .where(
                JOB.c.id == bindparam("job_id"),
                JOB.c.worker_id == bindparam("worker_id"),
                # OR of equalities, not IN: IN's expanding parameter needs Core's execution.
                or_(*(JOB.c.status == status for status in RUNNING)),
            )
            .values({name: bindparam(name) for name in columns})
        )
        return self._db.prepare(statement)


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
            started_at=now,
            updated_at=now,
            not_before=None,
            progress_step=0,
        )
        .returning(*JOB.c)
    )


def job_from_cursor(cursor: Any, row: tuple[Any, ...]) -> Job:
    names = [column[0] for column in cursor.description]
    return Job.model_validate(dict(zip(names, row, strict=True)))
