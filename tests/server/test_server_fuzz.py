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


A1111_ROUTES = ("/sdapi/v1", "/controlnet")


def test_the_a1111_routes_examples_are_requests_the_server_takes_and_answers_it_gives(
    queue: JobQueue,
) -> None:
    """Each request example of /sdapi/v1 is sent as is and answered 200 (the settler cancels
    its jobs: nothing is generated); each answer example has the keys of the real answer."""
    with fuzzable_server(queue, free_port()) as url, httpx.Client(base_url=url) as http:
        schema = http.get("/openapi.json").json()
        sent = 0
        for path, method, operation in _operations(schema, A1111_ROUTES):
            answer_example = _answer_example(operation)
            bodies = _request_examples(schema, operation) or [None]
            for body in bodies:
                answer = http.request(method, path, json=body, timeout=30)
                assert answer.status_code == 200, f"{method} {path}: {answer.text}"
                real = answer.json()
                if real != []:  # no models of that kind here: no item to compare
                    assert _shape(real) == _shape(answer_example), f"{method} {path}"
                sent += body is not None
    assert sent >= 8  # txt2img's three, img2img's two, options, png-info, extras


def _operations(schema: dict, prefixes: tuple[str, ...]) -> list[tuple[str, str, dict]]:
    return [
        (path, method.upper(), operation)
        for path, operations in schema["paths"].items() if path.startswith(prefixes)
        for method, operation in operations.items()
    ]  # fmt: skip


def _request_examples(schema: dict, operation: dict) -> list[object]:
    found: list[object] = []
    for content in operation.get("requestBody", {}).get("content", {}).values():
        if "example" in content:
            found.append(content["example"])
        found.extend(named["value"] for named in content.get("examples", {}).values())
        ref = content["schema"].get("$ref", "").rsplit("/", 1)[-1]
        found.extend(schema["components"]["schemas"].get(ref, {}).get("examples", []))
    return found


def _answer_example(operation: dict) -> object:
    return operation["responses"]["200"]["content"]["application/json"]["example"]


def _shape(value: object) -> object:
    """What an answer's shape is (its keys, or its items' keys), not its values, which
    depend on the server's models and state."""
    if isinstance(value, dict):
        return ("object", frozenset(value))
    if isinstance(value, list):
        return ("list", _shape(value[0]) if value else None)
    return type(value).__name__
