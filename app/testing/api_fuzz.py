"""The server fuzzed from its own OpenAPI schema by the real `schemathesis`, run as its users
run it (`schemathesis run URL`): its examples, coverage (boundary values: the id one past
the largest, the empty string, the wrong type), fuzzing and stateful phases, requests that
fit the schema and requests that do not, to every operation. An answer fails when it is a
5xx or does not match what the schema the server publishes says for its status.
Shared by the test suite (a short run) and `benchmarks/security.py` (a longer one).

The server is the real ASGI app on uvicorn, on a loopback port, over a real store, with no
worker: a settler cancels every job as it arrives, so an A1111 request that waits for its
jobs is answered in milliseconds, and nothing is generated. No callback sender runs, so a
fuzzed `callback_url` is stored but never called: no request leaves the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.settings import Settings
from app.server.run import ServeOptions, make_server

# Streams never end by themselves: a request to one would wait for ever. Their rules are
# tested on their own (tests/server/test_server_events.py).
NOT_FUZZED = ("/api/v1/events",)
CHECKS = ("not_a_server_error", "response_schema_conformance", "content_type_conformance")
# Sent with every request, as a program (not a web page) sends them: without it the Guard
# refuses form and text bodies (403) and the fuzz would stop there on those routes.
HEADERS: dict[str, str] = {"X-Easel-Client": "schemathesis"}
REQUEST_TIMEOUT_S = 30.0
SETTLE_EVERY_S = 0.02
OUTPUT_TAIL_CHARS = 4000


@dataclass(frozen=True)
class FuzzReport:
    requests: int  # sent, each with its answer, from schemathesis' HAR record
    server_errors: int  # of them answered 5xx
    passed: bool  # schemathesis found no failure (5xx or a schema mismatch)
    output: str  # the tail of what it printed: the failures, each with a curl to reproduce
    requested: tuple[str, ...] = ()  # "METHOD /path" of each request sent (ids filled in)


@contextmanager
def fuzzable_server(queue: JobQueue, port: int) -> Iterator[str]:
    """The server on `127.0.0.1:port` until the block ends; yields its URL."""
    server, _state = make_server(queue, Settings(), ServeOptions(port=port))
    thread = threading.Thread(target=server.run, name="fuzzed-http", daemon=True)
    thread.start()
    stop = threading.Event()
    settler = threading.Thread(target=_settle, args=(queue, stop), name="settler", daemon=True)
    settler.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise OSError("the fuzzed server did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        server.should_exit = True
        thread.join(timeout=10)
        settler.join(timeout=10)


def _settle(queue: JobQueue, stop: threading.Event) -> None:
    """Cancel every waiting job, as a worker would settle it (no model runs here)."""
    while not stop.wait(SETTLE_EVERY_S):
        for job in queue.jobs([JobStatus.PENDING], limit=100):
            queue.cancel(job.id or 0, source="fuzz settler")


def run_schemathesis(url: str, folder: Path, *, examples: int, seed: int | None) -> FuzzReport:
    """`schemathesis run` against `url`, up to `examples` generated requests per operation
    and phase; `seed`: the same requests every run (None: new ones). Its files (the HAR
    record, its cache) go to `folder`."""
    har = folder / "fuzz.har"
    command = [
        sys.executable, "-m", "schemathesis.cli", "run", f"{url}/openapi.json",
        "--checks", ",".join(CHECKS), "--max-examples", str(examples),
        "--request-timeout", str(REQUEST_TIMEOUT_S), "--workers", "1",
        "--continue-on-failure", "--no-color", "--report", "har", "--report-har-path", str(har),
        *[option for path in NOT_FUZZED for option in ("--exclude-path", path)],
        *[option for name, value in HEADERS.items() for option in ("--header", f"{name}: {value}")],
        *(["--seed", str(seed)] if seed is not None else []),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
    entries = _entries(har)
    statuses = [int(entry["response"]["status"]) for entry in entries]
    return FuzzReport(
        requests=len(statuses),
        server_errors=sum(1 for status in statuses if status >= 500),
        passed=done.returncode == 0,
        output=(done.stdout + done.stderr)[-OUTPUT_TAIL_CHARS:],
        requested=tuple(_requested(entry) for entry in entries),
    )


def _entries(har: Path) -> list[dict[str, Any]]:
    """Schemathesis' record of every request it sent, each with its answer."""
    if not har.exists():
        return []
    entries: list[dict[str, Any]] = json.loads(har.read_text(encoding="utf-8"))["log"]["entries"]
    return entries


def _requested(entry: dict[str, Any]) -> str:
    request = entry["request"]
    return f"{request['method'].upper()} {urlsplit(request['url']).path}"
