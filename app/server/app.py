"""The ASGI application: the routers, the guard in front of them, errors as one sentence."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import __version__
from app.engine.jobs.groups import GroupNotFound
from app.engine.jobs.queue import JobNotFound, RequestRefused
from app.engine.jobs.request_keys import KeyReused
from app.engine.jobs.states import TransitionNotAllowed
from app.errors import DatabaseError, MissingModel, UserError, internal_error
from app.server import a1111, a1111_controlnet, a1111_extras, api_v1, follow_ups, group_routes
from app.server.openapi_examples import with_examples
from app.server.redact import LOG_NAME
from app.server.security import (
    FOREIGN_HOST,
    cross_site_refusal,
    presented_token,
    token_matches,
)
from app.server.state import SLOT_KEY, ServerState, SlotKind

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

STREAM_PATHS = ("/api/v1/events",)
A1111_PREFIX = "/sdapi/"
# What a configured browser client may read of an answer, refusals included.
EXPOSED_HEADERS = ["Location", "Retry-After", "WWW-Authenticate"]
HANDLER_THREADS = int(os.environ.get("EASEL_SERVER_THREADS", "8"))


@asynccontextmanager
async def _lifespan(_app: FastAPI) -> AsyncIterator[None]:
    # Few threads for the handlers: each holds the GIL for most of its few milliseconds, so
    # more threads only queue inside the interpreter, unfairly (the slowest poll waited
    # seconds); the rest wait their turn in the limiter, first come first served.
    to_thread.current_default_thread_limiter().total_tokens = HANDLER_THREADS
    yield


def create_app(state: ServerState) -> FastAPI:
    app = FastAPI(
        lifespan=_lifespan, responses=ERROR_RESPONSES,
        title="Easel", version=__version__,
        description="Easel's job queue over HTTP: durable jobs, the same transition table as "
        "the window and the command line. `/sdapi/v1` speaks AUTOMATIC1111's API.",
    )  # fmt: skip
    app.state.easel = state
    app.include_router(api_v1.router)
    app.include_router(follow_ups.router)
    app.include_router(group_routes.router)
    app.include_router(a1111.router)
    app.include_router(a1111_extras.router)
    app.include_router(a1111_controlnet.router)
    with_examples(app)  # every /api/v1 operation: an example in the schema
    _add_error_handlers(app, state)
    app.add_middleware(Guard, state=state)  # before routing and bodies
    if state.cors_origins:
        # Outside the Guard, so that its refusals (401, 403, 413, 421, 503) carry the headers
        # a configured page needs to read them; an origin not configured gets none.
        app.add_middleware(
            CORSMiddleware, allow_origins=list(state.cors_origins), allow_methods=["*"],
            allow_headers=["*"], expose_headers=EXPOSED_HEADERS,
        )  # fmt: skip
    return app


class ErrorBody(BaseModel):
    """What every refusal and failure answers: one sentence."""

    error: str


# In the published schema, so a client (and the fuzzer, tests/server/test_server_fuzz.py)
# knows every 4xx and 5xx is `{"error": "..."}`, not FastAPI's default `{"detail": [...]}`.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "Refused: one sentence saying why"},
    "5XX": {"model": ErrorBody, "description": "Failed or busy: one sentence saying why"},
}


def error(status: int, sentence: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": sentence}, status_code=status, headers=headers)


def status_of(failure: UserError) -> int:
    if isinstance(failure, JobNotFound | GroupNotFound):
        return 404
    if isinstance(failure, TransitionNotAllowed | RequestRefused | KeyReused):
        return 409
    if isinstance(failure, MissingModel):
        return 422
    if isinstance(failure, DatabaseError):
        return 503
    return 422


def _add_error_handlers(app: FastAPI, state: ServerState) -> None:
    @app.exception_handler(UserError)
    async def user_error(_request: Request, failure: UserError) -> JSONResponse:
        status = status_of(failure)
        headers = {"Retry-After": "1"} if status == 503 else None
        return error(status, _sentence(state.redact(str(failure))), headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, failure: RequestValidationError) -> JSONResponse:
        return error(422, _sentence(validation_sentence(failure.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, failure: StarletteHTTPException) -> JSONResponse:
        sentence = _sentence(state.redact(str(failure.detail)))
        return error(failure.status_code, sentence, failure.headers)

    @app.exception_handler(Exception)
    async def bug(request: Request, failure: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error(500, _sentence(internal_error(failure, LOG_NAME)))  # the path: not sent


def validation_sentence(errors: Any) -> str:
    """FastAPI's list of problems as one sentence: the first, with where it is."""
    errors = list(errors)
    if not errors:
        return "The request is not valid"
    first = errors[0]
    if first.get("type") == "json_invalid":
        return f"The body is not valid JSON ({first.get('ctx', {}).get('error', 'unreadable')})"
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    message = str(first.get("msg", "is not valid"))
    if first.get("type") == "extra_forbidden":  # it might change the result: never ignored
        message = "not a field of this request (GET /openapi.json lists them)"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where or 'the request'}: {message}{more}"


def _sentence(text: str) -> str:
    line = " ".join(text.split())
    return line if line.endswith((".", "?", "!")) else f"{line}."


class Guard:
    """In front of everything: the Host, another site's page, the token, the body size and
    the requests in flight.

    Pure ASGI, so a refused request never reaches a router, reads no body and stores
    nothing. Event streams count against their own limit, not the in-flight one, and so do
    A1111 requests once they only wait for their jobs (`SLOT_KEY`)."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        kind = SlotKind.STREAM if scope["path"] in STREAM_PATHS else SlotKind.IN_FLIGHT
        slot = self.state.slots.take(kind)
        if slot is None:
            busy = self.state.slots.busy(kind)
            await error(503, busy, {"Retry-After": "1"})(scope, receive, send)
            return
        scope[SLOT_KEY] = slot
        try:
            if "content-length" not in headers and scope["method"] in ("POST", "PUT", "PATCH"):
                buffered = await self._read_limited(receive)
                if buffered is None:
                    await _too_large(self.state.limits.max_body_bytes)(scope, receive, send)
                    return
                receive = _replay(buffered, receive)
            await self.app(scope, receive, send)
        finally:
            slot.release()

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> JSONResponse | None:
        if not self.state.served.serves(headers.get("host")):
            return error(421, FOREIGN_HOST)
        page = cross_site_refusal(scope["method"], headers, self.state.cors_origins)
        if page is not None:
            return error(403, page)
        if self._token_needed(scope):
            presented = presented_token(headers.get("authorization"), headers.get("x-easel-token"))
            if not token_matches(self.state.token or "", presented):
                return error(
                    401, "This server needs a token: send it as `Authorization: Bearer <token>`.",
                    {"WWW-Authenticate": 'Bearer realm="easel", Basic realm="easel"'},
                )  # fmt: skip
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                return error(400, "The Content-Length header is not a number.")
            if int(length) > self.state.limits.max_body_bytes:
                return _too_large(self.state.limits.max_body_bytes)
        return None

    def _token_needed(self, scope: Scope) -> bool:
        if self.state.token is None or scope["method"] == "OPTIONS":
            return False
        # Only where the user allowed it, and only on loopback (`serve` checks the address).
        return not (self.state.a1111_without_token and scope["path"].startswith(A1111_PREFIX))

    async def _read_limited(self, receive: Receive) -> bytes | None:
        """A body sent without a length (chunked), read as it comes; None past the limit
        (the rest is left unread: the handler never sees it, nothing is stored)."""
        limit = self.state.limits.max_body_bytes
        parts: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(parts)
            body = message.get("body", b"")
            seen += len(body)
            if seen > limit:
                return None
            parts.append(body)
            if not message.get("more_body", False):
                return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _too_large(limit: int) -> JSONResponse:
    size = f"{limit // 2**20} MB" if limit >= 2**20 else f"{limit} bytes"
    return error(413, f"The request body is larger than the limit of {size}.")
