"""`Idempotency-Key` for every POST of `/api/v1`, as `POST /api/v1/jobs` has it: a request
sent again with its key answers what the first one answered and stores nothing new; the
key sent with another request (another route, job or body) is refused in one sentence.

Submits (follow-ups) store their key in their own transaction (`submit_keyed`); actions
on stored jobs (cancel, a group's pause) record their first answer (`answer_once`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Header
from pydantic import BaseModel

from app.engine.jobs.request_keys import RequestKey, fingerprint_of
from app.server.requests import KEY_LIMITS
from app.server.state import ServerState

KEY_DESCRIPTION = (
    "makes a retried request safe: the same key answers what the first request answered "
    "and stores nothing new; the key with another request is refused (409)"
)
IdempotencyKey = Annotated[
    str | None, Header(description=KEY_DESCRIPTION, json_schema_extra=KEY_LIMITS)
]
Answer = dict[str, Any]


def request_key(
    state: ServerState, key: str | None, route: str, body: BaseModel | None = None
) -> RequestKey | None:
    """The key of a request to `route` (the path, with its ids) with `body`; None without."""
    if key is None:
        return None
    content = {"route": route, "body": body.model_dump(mode="json") if body else None}
    keep_s = state.settings.idempotency_key_hours * 3600
    return RequestKey(key, fingerprint_of(content), keep_s=keep_s)


def answered_once(
    state: ServerState,
    key: str | None,
    route: str,
    body: BaseModel | None,
    act: Callable[[], Answer],
) -> tuple[Answer, bool]:
    """`act()`'s answer and False, or with a key seen before the first answer and True."""
    keyed = request_key(state, key, route, body)
    if keyed is None:
        return act(), False
    return state.queue.answer_once(keyed, act)
