"""Idempotency keys on submit: one key makes one set of jobs, however often and however
concurrently it is sent, within the time it is kept (then it is forgotten), on SQLite and
on PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, insert, select

from app.engine.jobs.follow_ups import NewJob, submit_with_follow_ups
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.queue import JobQueue, NewJobs
from app.engine.jobs.request_keys import FORGET_BATCH, KeyReused, RequestKey, fingerprint_of
from app.models.opening import open_database
from app.models.tables import REQUEST_KEY

pytestmark = pytest.mark.both_backends


def batch(prompt: str = "a cat", count: int = 1) -> NewJobs:
    return NewJobs([GenerationParams(prompt)] * count)


def test_the_same_key_answers_with_the_first_jobs_and_stores_nothing(queue: JobQueue) -> None:
    key = RequestKey("retry-1", fingerprint_of({"prompt": "a cat"}))
    first = queue.submit_keyed(batch(count=2), key=key)
    again = queue.submit_keyed(batch(count=2), key=key)
    assert not first.replayed and len(first.jobs) == 2
    assert again.replayed and again.jobs == first.jobs
    assert len(queue.jobs()) == 2
    other = queue.submit_keyed(batch(), key=RequestKey("retry-2", key.fingerprint))
    assert not other.replayed and len(queue.jobs()) == 3


def test_a_key_reused_for_another_request_is_refused(queue: JobQueue) -> None:
    queue.submit_keyed(batch("a cat"), key=RequestKey("k", fingerprint_of("a cat")))
    with pytest.raises(KeyReused, match="already used for a different request"):
        queue.submit_keyed(batch("a dog"), key=RequestKey("k", fingerprint_of("a dog")))
    assert len(queue.jobs()) == 1


def test_a_refused_request_leaves_its_key_free(queue: JobQueue) -> None:
    key = RequestKey("k", "f")
    with pytest.raises(InvalidParameters):
        submit_with_follow_ups(queue, NewJob(GenerationParams("a cat", steps=0)), key=key)
    assert queue.submit_keyed(NewJobs([GenerationParams("a cat")], parents=()), key=key).jobs
    assert len(queue.jobs()) == 1


def test_bad_keys_are_refused() -> None:
    for bad in ("", "x" * 201, "new\nline"):
        with pytest.raises(InvalidParameters, match="Idempotency-Key"):
            RequestKey(bad, "f")


def test_racing_requests_with_one_key_make_one_job(db_location: str) -> None:
    """Eight threads, each with its own connection, send one key at the same moment."""
    queues = [JobQueue(open_database(db_location)) for _ in range(8)]
    start = threading.Barrier(len(queues))
    answers: list[list[int]] = []

    def send(queue: JobQueue) -> None:
        start.wait()
        answers.append(queue.submit_keyed(batch(), key=RequestKey("race", "f")).jobs)

    threads = [threading.Thread(target=send, args=(queue,)) for queue in queues]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(answers) == len(queues)
        assert len({tuple(ids) for ids in answers}) == 1
        assert len(queues[0].jobs()) == 1
    finally:
        for queue in queues:
            queue.db.dispose()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _key_rows(queue: JobQueue) -> int:
    with queue.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(REQUEST_KEY)).scalar_one())


def _expired_keys(queue: JobQueue, count: int, at: float) -> None:
    rows = [{"key": f"old-{n}", "fingerprint": "f", "job_ids": "", "created_at": at + n}
            for n in range(count)]  # fmt: skip
    with queue.db.write() as conn:
        conn.execute(insert(REQUEST_KEY), rows)


def test_a_key_is_kept_for_its_time_then_forgotten_and_the_table_stays_bounded(
    queue: JobQueue,
) -> None:
    clock = Clock(1_000_000.0)
    timed = JobQueue(queue.db, clock=clock)
    key = RequestKey("retry-1", "f", keep_s=100)
    first = timed.submit_keyed(batch(), key=key)
    clock.now += 99  # a retry within the time: the same job
    assert timed.submit_keyed(batch(), key=key).jobs == first.jobs
    clock.now += 2  # 101 s after the first: forgotten, so this is a new request
    later = timed.submit_keyed(batch(), key=key)
    assert not later.replayed and later.jobs != first.jobs
    assert timed.submit_keyed(batch(), key=key).jobs == later.jobs  # and now kept again
    assert len(timed.jobs()) == 2
    # Keys nobody brings again are forgotten by the keyed submits after them, in batches.
    _expired_keys(timed, 150, at=clock.now - 1000)
    assert _key_rows(timed) == 151
    timed.submit_keyed(batch(), key=RequestKey("new-1", "f", keep_s=100))
    assert _key_rows(timed) == 151 - FORGET_BATCH + 1
    timed.submit_keyed(batch(), key=RequestKey("new-2", "f", keep_s=100))
    assert _key_rows(timed) == 3  # retry-1 (still in its time), new-1, new-2


def test_racing_requests_with_an_expired_key_make_one_new_job(db_location: str) -> None:
    """Eight connections bring one expired key at once, among many other expired keys that
    each of them also deletes: one new job, the same for all, and nobody waits for ever."""
    clock = Clock(2_000_000.0)
    queues = [JobQueue(open_database(db_location), clock=clock) for _ in range(8)]
    old = queues[0].submit_keyed(batch(), key=RequestKey("race", "f"))
    _expired_keys(queues[0], 300, at=clock.now)
    clock.now += 2 * 24 * 3600  # two days later
    start = threading.Barrier(len(queues))
    answers: list[list[int]] = []

    def send(queue: JobQueue) -> None:
        start.wait()
        answers.append(queue.submit_keyed(batch(), key=RequestKey("race", "f")).jobs)

    threads = [threading.Thread(target=send, args=(queue,)) for queue in queues]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(answers) == len(queues)
        assert len({tuple(ids) for ids in answers}) == 1 and answers[0] != old.jobs
        assert len(queues[0].jobs()) == 2
    finally:
        for queue in queues:
            queue.db.dispose()


def test_an_action_answers_once_per_key_and_a_refused_one_leaves_its_key_free(
    queue: JobQueue,
) -> None:
    """`answer_once`, for actions that write in transactions of their own (a cancel)."""
    job_id = queue.submit(GenerationParams("a cat"))
    calls: list[int] = []

    def cancel() -> dict[str, object]:
        calls.append(job_id)
        return {"changed": queue.cancel(job_id, source="test").changed}

    key = RequestKey("act-1", fingerprint_of({"route": "cancel", "job": job_id}))
    assert queue.answer_once(key, cancel) == ({"changed": True}, False)
    assert queue.answer_once(key, cancel) == ({"changed": True}, True)
    assert calls == [job_id]  # acted once
    with pytest.raises(KeyReused):
        queue.answer_once(RequestKey("act-1", "another request"), cancel)

    def refused() -> dict[str, object]:
        raise InvalidParameters("no")

    free = RequestKey("act-2", "f")
    with pytest.raises(InvalidParameters):
        queue.answer_once(free, refused)
    assert queue.answer_once(free, lambda: {"ok": True}) == ({"ok": True}, False)
