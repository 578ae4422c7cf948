"""What the store keeps about the jobs HTTP clients submitted (`api_job`, schema 9): which
API and client asked, and the callback told of the job's final status; and the queue's
callback secret (`queue_secret`). The server (`app.server`) reads and writes them only here:
like the window, it writes no SQL of its own."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, insert, or_, select, update

from app.engine.jobs.notes import CALLBACK_SOURCE, merged, notes_in
from app.engine.jobs.queue import JobNotFound, StoredHook, job_in, timeline_in
from app.models.db import Database, HotTransaction
from app.models.tables import API_JOB, JOB, JOB_NOTE, QUEUE_SECRET, Job, JobNote, JobTransition

EASEL_API, A1111_API = "easel", "sdapi"
CALLBACK_SECRET = "callback"
SECRETS_KEY = 0x45A5E9  # `serialised_write`: two servers starting at once make one secret
_SECRET = select(QUEUE_SECRET.c.value).where(QUEUE_SECRET.c.name == CALLBACK_SECRET)


@dataclass(frozen=True)
class ApiRecord:
    job_id: int
    api: str
    client: str
    callback_url: str | None
    callback_attempts: int
    callback_done_at: float | None
    callback_result: str


class ApiJobs:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._insert = db.prepare(
            insert(API_JOB).values(
                job_id=bindparam("job_id"),
                api=bindparam("api"),
                client=bindparam("client"),
                callback_url=bindparam("callback_url"),
                callback_attempts=0,
                callback_next_at=None,
                callback_done_at=None,
                callback_result="",
            )
        )

    def hook(self, api: str, client: str, callback_url: str | None) -> StoredHook:
        """Rows for new jobs, written in their submit's transaction (`submit_keyed`)."""

        def write(tx: HotTransaction, job_ids: list[int]) -> None:
            for job_id in job_ids:
                values = {"job_id": job_id, "api": api, "client": client,
                          "callback_url": callback_url}  # fmt: skip
                tx.execute(self._insert, values)

        return write

    def get(self, job_id: int) -> ApiRecord | None:
        with self.db.read() as conn:
            row = conn.execute(select(API_JOB).where(API_JOB.c.job_id == job_id)).first()
        return None if row is None else _record(row)

    def job_view(self, job_id: int) -> tuple[Job, list[JobTransition | JobNote], ApiRecord | None]:
        """A job, its timeline (transitions and notes) and its record, in one read (what a
        status poll asks)."""
        with self.db.read() as conn:
            job = job_in(conn, job_id)
            if job is None:
                raise JobNotFound(job_id)
            timeline = merged(timeline_in(conn, job_id), notes_in(conn, job_id))
            api = conn.execute(select(API_JOB).where(API_JOB.c.job_id == job_id)).first()
        return job, timeline, None if api is None else _record(api)

    def unsettled(self, api: str) -> list[int]:
        """Jobs submitted through `api` that are not finished (A1111's progress)."""
        return self._in_statuses(api, ("PENDING", "PROCESSING", "PAUSING", "BLOCKED", "PAUSED"))

    def running(self, api: str) -> list[int]:
        """Jobs submitted through `api` that a worker is generating now (A1111's interrupt)."""
        return self._in_statuses(api, ("PROCESSING", "PAUSING"))

    def _in_statuses(self, api: str, open_statuses: tuple[str, ...]) -> list[int]:
        query = (
            select(API_JOB.c.job_id)
            .join(JOB, JOB.c.id == API_JOB.c.job_id)
            .where(API_JOB.c.api == api, JOB.c.status.in_(open_statuses))
            .order_by(API_JOB.c.job_id)
        )
        with self.db.read() as conn:
            return [int(job_id) for (job_id,) in conn.execute(query)]

    def callbacks_due(self, now: float, limit: int = 50) -> list[tuple[ApiRecord, str]]:
        """Callbacks not yet delivered whose job is settled (finished, cancelled or given up),
        with its status, due now."""
        query = (
            select(API_JOB, JOB.c.status)
            .join(JOB, JOB.c.id == API_JOB.c.job_id)
            .where(
                API_JOB.c.callback_url.is_not(None),
                API_JOB.c.callback_done_at.is_(None),
                or_(
                    JOB.c.status.in_(("SUCCESS", "CANCELLED")),
                    and_(JOB.c.status.in_(("FAILED", "TIMEOUT")), JOB.c.given_up),
                ),
                (API_JOB.c.callback_next_at.is_(None)) | (API_JOB.c.callback_next_at <= now),
            )
            .order_by(API_JOB.c.job_id)
            .limit(limit)
        )
        with self.db.read() as conn:
            return [(_record(row), str(row.status)) for row in conn.execute(query)]

    def claim_callback(self, record: ApiRecord, now: float, lease_s: float) -> bool:
        """Take the next try of `record`'s callback for `lease_s` (False: another server on
        this database took it first), so two servers never both send it."""
        due = (API_JOB.c.callback_next_at.is_(None)) | (API_JOB.c.callback_next_at <= now)
        claim = (
            update(API_JOB)
            .where(
                API_JOB.c.job_id == record.job_id,
                API_JOB.c.callback_done_at.is_(None),
                API_JOB.c.callback_attempts == record.callback_attempts,
                due,
            )
            .values(callback_next_at=now + lease_s)
        )
        with self.db.write() as conn:
            return bool(conn.execute(claim).rowcount == 1)

    def callback_tried(
        self, job: Job, *, attempts: int, next_at: float | None, done_at: float | None,
        result: str, note: str, at: float,
    ) -> None:  # fmt: skip
        """Record one try: its state here, and a note in the job's timeline (`jobs.notes`),
        in one small transaction of its own (the job's final one committed long before)."""
        values = {"callback_attempts": attempts, "callback_next_at": next_at,
                  "callback_done_at": done_at, "callback_result": result}  # fmt: skip
        note_row = {"job_id": job.id, "attempt": job.attempt, "source": CALLBACK_SOURCE,
                    "message": note, "at": at}  # fmt: skip
        with self.db.write() as conn:
            conn.execute(update(API_JOB).where(API_JOB.c.job_id == job.id).values(**values))
            conn.execute(insert(JOB_NOTE), note_row)

    def clients(self, job_ids: Sequence[int]) -> dict[int, ApiRecord]:
        if not job_ids:
            return {}
        query = select(API_JOB).where(API_JOB.c.job_id.in_(list(job_ids)))
        with self.db.read() as conn:
            return {int(row.job_id): _record(row) for row in conn.execute(query)}

    def callback_secret(self) -> tuple[str, bool]:
        return callback_secret(self.db)


def _record(row: Any) -> ApiRecord:
    m = row._mapping
    return ApiRecord(
        int(m["job_id"]), m["api"], m["client"], m["callback_url"], int(m["callback_attempts"]),
        m["callback_done_at"], m["callback_result"],
    )  # fmt: skip


def callback_secret(db: Database) -> tuple[str, bool]:
    """The queue's callback secret (`server/signing.py`), made now if it has none; and
    whether it was made now."""
    found = _stored_secret(db)
    if found is not None:
        return found, False
    with db.serialised_write(SECRETS_KEY) as conn:
        row = conn.execute(_SECRET).first()
        if row is not None:  # another server made it while this one waited for the lock
            return str(row.value), False
        secret = secrets.token_hex(32)
        values = {"name": CALLBACK_SECRET, "value": secret, "created_at": time.time()}
        conn.execute(insert(QUEUE_SECRET), values)
    return secret, True


def _stored_secret(db: Database) -> str | None:
    with db.read() as conn:
        value = conn.execute(_SECRET).scalar_one_or_none()
    return None if value is None else str(value)
