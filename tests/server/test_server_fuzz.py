"""The real server fuzzed from its own OpenAPI schema by the real `schemathesis`: requests
that fit the schema and requests that do not, to every operation; no answer may be a 5xx or
break the schema the server publishes. A short run with a fixed seed (the same requests
every time); `benchmarks/security.py` runs a longer, random one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from app.engine.jobs.queue import JobQueue
from app.testing.api_fuzz import fuzzable_server, run_schemathesis
from tests.server.serving import free_port

pytestmark = pytest.mark.timeout(180)

FOLLOW_UPS_AND_GROUPS = [
    *[rf"POST /api/v1/jobs/\d+/{what}" for what in ("hires", "upscale", "tiled", "vary",
                                                    "inpaint", "outpaint", "edit")],
    r"GET /api/v1/groups/\d+",
    *[rf"POST /api/v1/groups/\d+/{what}" for what in ("pause", "resume", "cancel", "retry")],
]  # fmt: skip
EXAMPLES = 10  # per operation and phase: about 1,300 requests, 15-35 s here


def test_fuzzed_requests_get_no_server_error_and_answers_that_fit_the_schema(
    queue: JobQueue, tmp_path: Path
) -> None:
    with fuzzable_server(queue, free_port()) as url:
        report = run_schemathesis(url, tmp_path, examples=EXAMPLES, seed=1)
    assert report.requests > 500, f"schemathesis hardly ran:\n{report.output}"
    assert report.server_errors == 0 and report.passed, report.output
    for route in FOLLOW_UPS_AND_GROUPS:  # the newer routes are in the run too
        assert any(re.fullmatch(route, sent) for sent in report.requested), route


@pytest.mark.parametrize(
    ("params", "headers", "status"),
    [
        ({"after": str(2**66)}, {}, 422),
        ({"job": str(2**66)}, {}, 422),
        ({}, {b"Last-Event-ID": str(2**66).encode()}, 400),
        ({}, {b"Last-Event-ID": b"\xb2"}, 400),  # "²": a digit to str.isdigit, not to int
    ],
    ids=["after", "job", "last-event-id", "superscript"],
)
def test_an_event_stream_asked_from_an_id_no_store_holds_is_refused(
    queue: JobQueue, params: dict[str, str], headers: dict[bytes, bytes], status: int
) -> None:
    """What the fuzzer leaves out (a stream never ends): such an id overflowed the driver
    inside the stream, after its 200, or was a 500."""
    with (
        fuzzable_server(queue, free_port()) as url,
        httpx.stream("GET", f"{url}/api/v1/events", params=params, headers=headers) as answer,
    ):
        assert answer.status_code == status
        assert "error" in json.loads(answer.read())
