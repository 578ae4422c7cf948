"""Idempotency keys: a client that retries a submit after a timeout gets the jobs its first
request made, never a second set (schema 9, the `request_key` table).

The key row is inserted first, inside the submit's own transaction, with `ON CONFLICT DO
NOTHING`: on SQLite the transaction holds the write lock from BEGIN, so a second request
with the key waits and then finds the row; on PostgreSQL the second insert waits for the
first transaction's commit (a unique key being written) and then inserts nothing. Either
way one transaction stores the jobs and the other returns them. A request that fails
rolls its key back with it, so a retry after a refused request is decided afresh.

Keys are kept for `RequestKey.keep_s` (a day by default, as Stripe does; the setting
`idempotency_key_hours`): a key older than that is forgotten, so a request that brings it
again is a new request. Forgetting happens in the keyed submits themselves, so the table
stays bounded with no sweeper to run: the key a request brings is deleted first if it
expired (in the same transaction, so two requests with it still make one set of jobs),
and each keyed submit deletes up to `FORGET_BATCH` other expired keys, more than the one
it adds, through the `created_at` index (nothing to do costs one index probe).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite

from app.engine.jobs.params import InvalidParameters
from app.errors import UserError
from app.models.db import Database, HotTransaction
from app.models.tables import REQUEST_KEY

MAX_KEY_CHARS = 200
KEEP_S = 24 * 3600.0  # how long a key is remembered, unless the request says otherwise
FORGET_BATCH = 100  # expired keys a keyed submit deletes besides its own


class KeyReused(UserError):
    """The key was used before for a request with other settings."""


class KeyInUse(KeyReused):
    """The first request with the key is still being answered (a conflict, as reuse is)."""


@dataclass(frozen=True)
class RequestKey:
    key: str
    fingerprint: str  # `fingerprint_of` the request: the same key for another request is refused
    keep_s: float = KEEP_S  # a key older than this is forgotten: the request is a new one
    internal: bool = False  # Easel's own (`internal_key`), never a client's

    def __post_init__(self) -> None:
        if self.internal:
            return
        if not 1 <= len(self.key) <= MAX_KEY_CHARS or not self.key.isprintable():
            raise InvalidParameters(
                f"the Idempotency-Key must be 1 to {MAX_KEY_CHARS} printable characters"
            )


# Easel's own keys start with a tab, which a client's key (printable) cannot: a client
# that sends "recompose ..." as its Idempotency-Key cannot take one of them.
INTERNAL_PREFIX = "\t"


def internal_key(name: str) -> RequestKey:
    """A key for something Easel itself must do once even when two processes race to do it
    (`groups._recompose`), apart from every client's keys."""
    return RequestKey(INTERNAL_PREFIX + name, fingerprint_of(name), internal=True)


def fingerprint_of(request: Any) -> str:
    """A digest of a request's JSON-able content, the same for the same request."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Earlier:
    """What the first request with a key made."""

    jobs: list[int]
    follow_ups: list[int]
    answer: dict[str, Any] | None = None  # an action's first answer (`answer_once`)


class KeyStatements:
    def __init__(self, db: Database) -> None:
        dialect = postgresql if db.engine.dialect.name == "postgresql" else sqlite
        claim = (
            dialect.insert(REQUEST_KEY)
            .values(
                key=bindparam("key"),
                fingerprint=bindparam("fingerprint"),
                job_ids="",
                created_at=bindparam("now"),
            )
            .on_conflict_do_nothing(index_elements=["key"])
            .returning(REQUEST_KEY.c.key)
        )
        self._claim = db.prepare(claim)
        self._read = db.prepare(
            select(REQUEST_KEY.c.fingerprint, REQUEST_KEY.c.job_ids).where(
                REQUEST_KEY.c.key == bindparam("key")
            )
        )
        self._forget_this = db.prepare(
            delete(REQUEST_KEY).where(
                REQUEST_KEY.c.key == bindparam("key"),
                REQUEST_KEY.c.created_at < bindparam("before"),
            )
        )
        self._forget_key = db.prepare(
            delete(REQUEST_KEY).where(REQUEST_KEY.c.key == bindparam("key"))
        )
        expired = (
            select(REQUEST_KEY.c.key)
            .where(REQUEST_KEY.c.created_at < bindparam("before"))
            .order_by(REQUEST_KEY.c.created_at)
            .limit(FORGET_BATCH)
            # PostgreSQL: keys another submit is deleting are left to it, never waited for
            # (two such deletes could wait for each other); SQLite has one writer anyway.
            .with_for_update(skip_locked=True)
        )
        self._forget_expired = db.prepare(
            delete(REQUEST_KEY).where(REQUEST_KEY.c.key.in_(expired.scalar_subquery()))
        )
        self._record = db.prepare(
            update(REQUEST_KEY)
            .where(REQUEST_KEY.c.key == bindparam("key"))
            .values(job_ids=bindparam("job_ids"))
        )

    def claim(self, tx: HotTransaction, key: RequestKey, now: float) -> Earlier | None:
        """Take `key` for this transaction (None), or what the request that took it made
        (within `key.keep_s`; an older one is forgotten, with a batch of other expired keys)."""
        before = now - key.keep_s
        tx.execute(self._forget_this, {"key": key.key, "before": before})
        tx.execute(self._forget_expired, {"before": before})
        values = {"key": key.key, "fingerprint": key.fingerprint, "now": now}
        if tx.execute(self._claim, values).fetchone() is not None:
            return None
        row = tx.execute(self._read, {"key": key.key}).fetchone()
        fingerprint, job_ids = row
        if fingerprint != key.fingerprint:
            raise KeyReused(
                f"the Idempotency-Key {key.key!r} was already used for a different request"
            )
        if not job_ids:  # claimed by an action still running (`answer_once`)
            raise KeyInUse(
                f"the request with the Idempotency-Key {key.key!r} is still being answered; "
                "send it again in a moment"
            )
        stored = json.loads(job_ids)
        return Earlier(list(stored["jobs"]), list(stored["follow_ups"]), stored.get("answer"))

    def record(
        self,
        tx: HotTransaction,
        key: RequestKey,
        jobs: list[int],
        follow_ups: list[int],
        answer: dict[str, Any] | None = None,
    ) -> None:
        stored: dict[str, Any] = {"jobs": jobs, "follow_ups": follow_ups}
        if answer is not None:
            stored["answer"] = answer
        tx.execute(self._record, {"key": key.key, "job_ids": json.dumps(stored, default=str)})

    def forget(self, tx: HotTransaction, key: RequestKey) -> None:
        tx.execute(self._forget_key, {"key": key.key})


Answer = dict[str, Any]


def answer_once(
    db: Database, statements: KeyStatements, key: RequestKey, now: float, act: Callable[[], Answer]
) -> tuple[Answer, bool]:
    """`act()` once per `key`: (its answer, False), or (the first answer, True) when the key
    was seen before. For actions that write in transactions of their own (a cancel, a group's
    pause): the key is claimed first, `act` runs, then its answer is recorded; a refused
    action forgets the key (a retry is decided afresh), and a request that comes while the
    first is still running is refused (`KeyInUse`) rather than acting twice."""
    with db.hot_write() as tx:
        earlier = statements.claim(tx, key, now)
    if earlier is not None:
        if earlier.answer is None:  # a submit's key: its fingerprint differs, but be sure
            raise KeyReused(
                f"the Idempotency-Key {key.key!r} was already used for a different request"
            )
        return earlier.answer, True
    try:
        answer = act()
    except BaseException:
        with db.hot_write() as tx:
            statements.forget(tx, key)
        raise
    with db.hot_write() as tx:
        statements.record(tx, key, [], [], answer)
    return answer, False
