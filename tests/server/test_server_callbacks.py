"""Callbacks: after the job is settled, once, retried with backoff, each try a note in the
job's timeline (the API's, the command line's), and never twice from two servers on one
database."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from app.cli import main
from app.engine.jobs.api_jobs import EASEL_API, ApiJobs
from app.engine.jobs.notes import notes_of
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, NewJobs
from app.models.opening import open_database
from app.server import callbacks
from app.server.api_v1 import timeline_json
from app.server.callbacks import CallbackPolicy, CallbackSender

pytestmark = pytest.mark.both_backends

LOOPBACK_ALLOWED = CallbackPolicy(allow_private=True)  # the receivers here are on loopback


class Receiver:
    def __init__(self, statuses: list[int]) -> None:
        self.got: list[dict[str, Any]] = []
        answers = iter(statuses)
        got = self.got

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                got.append(body)
                self.send_response(next(answers, 204))
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver([500])  # the first try fails, the next succeed
    yield receiver
    receiver.server.shutdown()


def settled_job(queue: JobQueue, url: str) -> int:
    records = ApiJobs(queue.db)
    stored = queue.submit_keyed(NewJobs([GenerationParams("a cat")]),
                                with_jobs=records.hook(EASEL_API, "test", url))  # fmt: skip
    [job_id] = stored.jobs
    return job_id


def test_a_callback_waits_for_the_end_retries_and_is_sent_once_each_try_in_the_timeline(
    queue: JobQueue,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    db_location: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(callbacks, "FIRST_BACKOFF_S", 0.0)
    job_id = settled_job(queue, receiver.url)
    sender = CallbackSender(queue, ApiJobs(queue.db), policy=LOOPBACK_ALLOWED)
    assert sender.send_due() == 0 and receiver.got == []  # PENDING: nothing to tell yet
    queue.cancel(job_id, source="test")
    assert sender.send_due() == 0  # the receiver answered 500
    assert sender.send_due() == 1
    assert sender.send_due() == 0  # delivered: never again
    assert [(b["job_id"], b["status"]) for b in receiver.got] == [(job_id, "CANCELLED")] * 2
    record = ApiJobs(queue.db).get(job_id)
    assert record is not None and record.callback_attempts == 2
    assert record.callback_result.startswith("delivered (HTTP 204)")
    # Each try is a note in the job's timeline, after the transition that settled it.
    job, timeline, _ = ApiJobs(queue.db).job_view(job_id)
    shown = [timeline_json(row) for row in timeline]
    assert [(row["kind"], row.get("event"), row["source"]) for row in shown] == [
        ("transition", "SUBMIT", "user"), ("transition", "CANCEL", "test"),
        ("note", None, "callback"), ("note", None, "callback"),
    ]  # fmt: skip
    failed = "failed: receiver answered HTTP 500; tried again in 0 s"
    assert shown[2]["message"] == f"callback 1 of 8 to {receiver.url}: {failed}"
    assert shown[3]["message"] == (
        f"callback 2 of 8 to {receiver.url}: delivered (HTTP 204), status CANCELLED"
    )
    assert [row.attempt for row in notes_of(queue.db, job_id)] == [job.attempt] * 2
    assert main(["--db", db_location, "show", str(job_id)]) == 0
    lines = capsys.readouterr().out.split("timeline:")[1].strip().splitlines()
    assert "CANCEL" in lines[1] and "answered HTTP 500" in lines[2] and "note" in lines[2]
    assert "delivered (HTTP 204)" in lines[3] and lines[3].index("note") == lines[2].index("note")


def test_two_servers_on_one_database_send_a_callback_once(
    queue: JobQueue, db_location: str
) -> None:
    receiver = Receiver([])
    try:
        job_id = settled_job(queue, receiver.url)
        queue.cancel(job_id, source="test")
        others = [JobQueue(open_database(db_location)) for _ in range(4)]
        senders = [CallbackSender(other, ApiJobs(other.db), policy=LOOPBACK_ALLOWED)
                   for other in others]  # fmt: skip
        start = threading.Barrier(len(senders))

        def send(sender: CallbackSender) -> None:
            start.wait()
            sender.send_due()

        threads = [threading.Thread(target=send, args=(s,)) for s in senders]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert [b["job_id"] for b in receiver.got] == [job_id]
        for other in others:
            other.db.dispose()
    finally:
        receiver.server.shutdown()
