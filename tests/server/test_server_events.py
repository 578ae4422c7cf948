"""The event stream's order on PostgreSQL, where ids are handed out before commit, and
what a client hears when the store is locked."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import event, insert

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.opening import open_database
from app.models.tables import TRANSITION
from app.server import events
from app.server.events import Cursor, read_after
from tests import pg
from tests.faults import write_lock_held
from tests.server.test_server_api import running

pytestmark = pytest.mark.both_backends  # the tests that take a store run on both


def test_a_transition_committed_late_with_a_lower_id_is_not_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pg.fresh_schema() as url:
        queue = JobQueue(open_database(url))
        late_writer = open_database(url)
        try:
            first, second = queue.submit_many([GenerationParams("a"), GenerationParams("b")])
            start = max(t.id or 0 for t in queue.timeline(second))
            cursor = Cursor(start, waits_for_gaps=True)
            with late_writer.write() as conn:  # takes the next id, commits last
                row = {"job_id": first, "attempt": 1, "from_status": "PENDING",
                       "to_status": "PENDING", "event": "SUBMIT", "source": "late",
                       "message": "", "at": queue.clock()}  # fmt: skip
                inserted = conn.execute(insert(TRANSITION).values(**row)).inserted_primary_key
                assert inserted is not None
                late_id = inserted[0]
                queue.cancel(second, source="test")  # a higher id, committed first
                assert read_after(queue, cursor, None) == []  # waits for the gap
                assert cursor.last_id == start
            got = read_after(queue, cursor, None)
            assert [r["id"] for r in got] == [late_id, late_id + 1]
            # A gap that never fills (a rolled-back id) is waited for only so long.
            monkeypatch.setattr(events, "GAP_WAIT_S", 0.2)
            try:
                with late_writer.write() as conn:
                    conn.execute(insert(TRANSITION).values(**row))
                    raise RuntimeError("roll back")
            except RuntimeError:
                pass
            queue.pause(first, source="test")
            assert read_after(queue, cursor, None) == []
            time.sleep(0.3)
            assert [r["source"] for r in read_after(queue, cursor, None)] == ["test"]
        finally:
            queue.db.dispose()
            late_writer.dispose()


def test_a_locked_store_is_a_503_sentence_and_then_works(tmp_path: Path) -> None:
    path = tmp_path / "easel.db"
    queue = JobQueue(open_database(path, lock_timeout_s=0.3))
    try:
        with running(queue) as api:
            with write_lock_held(path):
                answer = api.client.post("/api/v1/jobs", json={"prompt": "a cat"})
                assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
                [sentence] = answer.json().values()
                assert "lock" in sentence.lower() and "\n" not in sentence
                reading = api.client.get("/api/v1/jobs")  # reads go on under a write lock
                assert reading.status_code == 200 and reading.json()["jobs"] == []
            assert api.client.post("/api/v1/jobs", json={"prompt": "a cat"}).status_code == 201
    finally:
        queue.db.dispose()


def test_many_writers_and_a_reconnecting_reader_meet_every_transition_once(
    db_location: str,
) -> None:
    """Writers on their own connections fire at once while a reader reads in short bursts,
    as a client that keeps reconnecting does: every row once, in id order."""
    queue = JobQueue(open_database(db_location))
    try:
        ids = queue.submit_many([GenerationParams(f"job {n}") for n in range(40)])
        cursor = Cursor(0, waits_for_gaps=not queue.db.is_sqlite)
        seen: list[int] = []
        done = threading.Event()

        def write(part: list[int]) -> None:
            writer = JobQueue(open_database(db_location))
            for job_id in part:
                writer.pause(job_id, source="w")
                writer.resume(job_id, source="w")
                writer.cancel(job_id, source="w")
            writer.db.dispose()

        writers = [threading.Thread(target=write, args=(ids[n::4],)) for n in range(4)]
        for writer in writers:
            writer.start()

        def all_written() -> None:
            for writer in writers:
                writer.join()
            done.set()

        threading.Thread(target=all_written).start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            finished = done.is_set()
            resumed = Cursor(cursor.last_id, cursor.waits_for_gaps)  # a reconnect
            seen += [row["id"] for row in read_after(queue, resumed, None)]
            cursor = resumed
            if finished and len(seen) >= 40 * 4:
                break
            time.sleep(0.01)
        stored = [t.id or 0 for job_id in ids for t in queue.timeline(job_id)]
        assert seen == sorted(seen) and len(seen) == len(set(seen))
        assert sorted(seen) == sorted(stored)
    finally:
        queue.db.dispose()


def _read_stream(url: str, after: int, want: int, got: list[int], deadline: float) -> None:
    """An SSE client: the transition ids it hears, until it heard `want` of them."""
    with (
        httpx.Client(base_url=url, timeout=30) as client,
        client.stream("GET", "/api/v1/events", params={"after": str(after)}) as stream,
    ):
        for line in stream.iter_lines():
            if line.startswith("id: "):
                got.append(int(line[4:]))
            if len(got) >= want or time.monotonic() > deadline:
                return


def test_many_streams_hear_every_transition_once_from_one_reader_of_the_table(
    db_location: str,
) -> None:
    """Twelve streams while two writers fire 60 transitions on their own connections, and a
    late stream resumed from before what the hub holds (it started again, at the newest
    row, for that stream): each hears every transition once, in id order, and the history
    table is read once per poll, idle or busy, not once per stream."""
    queue = JobQueue(open_database(db_location))
    reads: list[str] = []
    event.listen(queue.db.engine, "before_cursor_execute",
                 lambda _c, _cur, sql, *_a: reads.append(sql) if "FROM job_transition" in sql
                 else None)  # fmt: skip
    try:
        with running(queue) as api:
            ids = queue.submit_many([GenerationParams(f"job {n}") for n in range(20)])
            start = max(t.id or 0 for t in queue.timeline(ids[-1]))
            heard: list[list[int]] = [[] for _ in range(12)]
            deadline = time.monotonic() + 60
            readers = [threading.Thread(target=_read_stream,
                                        args=(api.url, start, 60, got, deadline))
                       for got in heard]  # fmt: skip
            for reader in readers:
                reader.start()
            hub = None
            while hub is None or hub.polls == 0:  # the streams are open and read
                time.sleep(0.05)
                hub = getattr(api.app.state, "event_hub", None)
            reads_before, polls_before = len(reads), hub.polls
            time.sleep(0.5)  # idle streams: about ten polls

            def write(part: list[int]) -> None:
                writer = JobQueue(open_database(db_location))
                for job_id in part:
                    writer.pause(job_id, source="w")
                    writer.resume(job_id, source="w")
                    writer.cancel(job_id, source="w")
                writer.db.dispose()

            writers = [threading.Thread(target=write, args=(ids[n::2],)) for n in range(2)]
            for thread in [*writers]:
                thread.start()
            for thread in [*writers, *readers]:
                thread.join(timeout=60)
            stream_reads, polls = len(reads) - reads_before, hub.polls - polls_before
            late: list[int] = []
            _read_stream(api.url, start, 60, late, time.monotonic() + 30)
            assert hub.base > start  # it resumed from before the hub's rows: the table
        stored = sorted(t.id or 0 for job_id in ids for t in queue.timeline(job_id)[1:])
        assert len(stored) == 60
        for got in [*heard, late]:
            assert got == stored  # every transition, once, in id order
        assert polls >= 5 and stream_reads <= polls + 2  # one reader, however many streams
    finally:
        queue.db.dispose()
