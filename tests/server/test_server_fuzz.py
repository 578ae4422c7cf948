"""The real server fuzzed from its own OpenAPI schema by the real `schemathesis`: requests
that fit the schema and requests that do not, to every operation; no answer may be a 5xx or
break the schema the server publishes. A short run with a fixed seed (the same requests
every time); `benchmarks/security.py` runs a longer, random one."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.testing.api_fuzz import fuzzable_server, run_schemathesis
from tests.server.serving import free_port

pytestmark = pytest.mark.timeout(180)

EXAMPLES = 10  # per operation and phase: about 1,300 requests, 15-35 s here


def test_fuzzed_requests_get_no_server_error_and_answers_that_fit_the_schema(
    queue: JobQueue, tmp_path: Path
) -> None:
    with fuzzable_server(queue, free_port()) as url:
        report = run_schemathesis(url, tmp_path, examples=EXAMPLES, seed=1)
    assert report.requests > 500, f"schemathesis hardly ran:\n{report.output}"
    assert report.server_errors == 0 and report.passed, report.output
