"""Reorder: moving a pending job changes the order in which real claims take the jobs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, Placement, RequestRefused
from app.models.opening import open_database


def claim_order(queue: JobQueue) -> list[int]:
    order = []
    while (job := queue.claim("host:1:t")) is not None:
        assert job.id is not None
        order.append(job.id)
    return order


def queue_of(folder: Path, priorities: list[int]) -> tuple[JobQueue, list[int]]:
    queue = JobQueue(open_database(folder / "easel.db"))
    ids = [queue.submit(GenerationParams(f"job {n}"), priority=p) for n, p in enumerate(priorities)]
    return queue, ids


MOVES = st.lists(
    st.tuples(st.integers(0, 7), st.one_of(st.sampled_from(list(Placement)), st.integers(0, 7))),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(priorities=st.lists(st.integers(-2, 2), min_size=2, max_size=8), moves=MOVES)
def test_moves_change_the_claim_order_like_moving_in_a_list(
    tmp_path_factory: pytest.TempPathFactory, priorities: list[int], moves: list[tuple[int, object]]
) -> None:
    queue, ids = queue_of(tmp_path_factory.mktemp("q"), priorities)
    expected = sorted(ids, key=lambda i: (-priorities[ids.index(i)], i))  # the claim's order
    for mover, where in moves:
        job_id = ids[mover % len(ids)]
        before = ids[where % len(ids)] if isinstance(where, int) else None
        if before is not None:
            queue.move(job_id, before=before)
        else:
            assert isinstance(where, Placement)
            queue.move(job_id, to=where)
        if before == job_id:
            continue  # moving a job before itself changes nothing
        expected.remove(job_id)
        if where is Placement.TOP:
            expected.insert(0, job_id)
        elif where is Placement.BOTTOM:
            expected.append(job_id)
        else:
            expected.insert(expected.index(before or 0), job_id)
    assert claim_order(queue) == expected
    queue.db.dispose()


def test_move_before_puts_the_job_right_before_and_leaves_the_others(tmp_path: Path) -> None:
    queue, [a, b, c, d] = queue_of(tmp_path, [0, 0, 0, 0])
    queue.move(d, before=b)
    assert claim_order(queue) == [a, d, b, c]
    queue.db.dispose()


def test_only_pending_jobs_move(tmp_path: Path) -> None:
    queue, [a, b] = queue_of(tmp_path, [0, 0])
    queue.cancel(a)
    with pytest.raises(RequestRefused, match=f"Job {a} is not queued"):
        queue.move(a, to=Placement.TOP)
    with pytest.raises(RequestRefused, match=f"Job {a} is not queued"):
        queue.move(b, before=a)
    queue.db.dispose()
