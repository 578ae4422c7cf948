"""Callback signatures: `X-Easel-Signature: sha256=<hex HMAC-SHA256 of the raw body>`.

The key is the queue's own (`queue_secret`, made once by the first server that needs it),
not a file of one machine: every server on a shared PostgreSQL queue sends the callbacks
of jobs any of them took, and a receiver must check them all with one secret. Whoever can
read the queue's database can read it; they can change the jobs themselves already. It is
never in settings.json, never in a log; `serve` prints it the once it makes it, and
`serve --show-callback-secret` on demand.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from sqlalchemy import insert, select

from app.models.db import Database
from app.models.tables import QUEUE_SECRET

SIGNATURE_HEADER = "X-Easel-Signature"
CALLBACK_SECRET = "callback"
SECRETS_KEY = 0x45A5E9  # `serialised_write`: two servers starting at once make one secret


def callback_secret(db: Database) -> tuple[str, bool]:
    """The queue's callback secret, made now if it has none; and whether it was made now."""
    found = _stored(db)
    if found is not None:
        return found, False
    with db.serialised_write(SECRETS_KEY) as conn:
        row = conn.execute(
            select(QUEUE_SECRET.c.value).where(QUEUE_SECRET.c.name == CALLBACK_SECRET)
        ).first()
        if row is not None:  # another server made it while this one waited for the lock
            return str(row.value), False
        secret = secrets.token_hex(32)
        values = {"name": CALLBACK_SECRET, "value": secret, "created_at": time.time()}
        conn.execute(insert(QUEUE_SECRET), values)
    return secret, True


def _stored(db: Database) -> str | None:
    query = select(QUEUE_SECRET.c.value).where(QUEUE_SECRET.c.name == CALLBACK_SECRET)
    with db.read() as conn:
        value = conn.execute(query).scalar_one_or_none()
    return None if value is None else str(value)


def signature(secret: str, body: bytes) -> str:
    """The header's value for `body`: what a receiver computes and compares."""
    return "sha256=" + hmac.new(secret.encode("ascii"), body, hashlib.sha256).hexdigest()
