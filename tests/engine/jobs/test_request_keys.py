"""Idempotency keys on submit: one key makes one set of jobs, however often and however
concurrently it is sent, on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading

import pytest

from app.engine.jobs.follow_ups import NewJob, submit_with_follow_ups
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.queue import JobQueue, NewJobs
from app.engine.jobs.request_keys import KeyReused, RequestKey, fingerprint_of
from app.models.opening import open_database

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
