"""Search, stars, reorder and prune on both stores: SQLite (FTS5) and PostgreSQL (tsvector)."""

from __future__ import annotations

import pytest

from app.engine.history.retention import RetentionRule, prune
from app.engine.history.search import JobFilter, search
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, Placement
from app.engine.jobs.states import JobEvent

pytestmark = pytest.mark.both_backends


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("red circle", ["a red circle"]),
        ("red -circle", ["a red square"]),
        ("circ*", ["a blue circle", "a red circle"]),
        ('"red circle"', ["a red circle"]),
        ("neg:blurry", ["a blue circle"]),
        ("-red", ["a blue circle"]),
    ],
)
def test_word_search(queue: JobQueue, text: str, expected: list[str]) -> None:
    for prompt in ("a red circle", "a red square"):
        queue.submit(GenerationParams(prompt))
    queue.submit(GenerationParams("a blue circle", negative_prompt="blurry"))
    assert [job.prompt for job in search(queue, JobFilter(text=text))] == sorted(
        expected, key=["a blue circle", "a red square", "a red circle"].index
    )


def test_move_and_prune(queue: JobQueue) -> None:
    a, b, c = queue.submit_many([GenerationParams(p) for p in ("a", "b", "c")])
    queue.move(c, to=Placement.TOP)
    queue.move(a, before=b)
    claimed = [queue.claim("host:1:t") for _ in range(3)]
    assert [job.id for job in claimed if job] == [c, a, b]
    for job_id in (a, b, c):
        queue.fire(job_id, JobEvent.COMPLETE, source="worker")
    assert prune(queue, RetentionRule(keep=1)).removed == [a, b]
    assert [job.id for job in queue.jobs()] == [c]
