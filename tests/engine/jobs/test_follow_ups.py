"""One request, one transaction: a job, its seed batch and what follows each of them."""

from __future__ import annotations

import pytest

from app.engine.jobs.follow_ups import (
    FollowUps,
    NewJob,
    Upscale,
    Variations,
    submit_with_follow_ups,
)
from app.engine.jobs.graph import parents_of
from app.engine.jobs.graph_sql import InvalidDependency
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, NewJobs
from app.engine.jobs.states import JobStatus
from app.errors import UserError


def test_a_seed_batch_with_upscales_is_stored_parents_first(queue: JobQueue) -> None:
    request = NewJob(GenerationParams("a red fox", seed=-1, width=512, height=512), count=3)
    submitted = submit_with_follow_ups(queue, request, FollowUps(upscale=Upscale()))
    assert len(submitted.jobs) == 3 and len(submitted.follow_ups) == 3
    assert submitted.all == tuple(sorted(submitted.all))  # parents, then their children
    for parent_id, child_id in zip(submitted.jobs, submitted.follow_ups, strict=True):
        parent, child = queue.get(parent_id), queue.get(child_id)
        assert parents_of(queue, child_id) == [parent_id]
        assert child.status == JobStatus.BLOCKED and child.init_image == f"job:{parent_id}"
        assert child.seed == parent.seed >= 0  # the parent's seed, made concrete at submit
        assert (child.width, child.height) == (1024, 1024)
    assert len({queue.get(i).seed for i in submitted.jobs}) == 3  # each its own random seed


def test_a_fixed_seed_counts_up_and_variations_wait_for_each_job(queue: JobQueue) -> None:
    request = NewJob(GenerationParams("a red fox", seed=7), count=2)
    submitted = submit_with_follow_ups(queue, request, FollowUps(variations=Variations(2)))
    assert [queue.get(i).seed for i in submitted.jobs] == [7, 8]
    assert [parents_of(queue, i) for i in submitted.follow_ups] == [
        [submitted.jobs[0]], [submitted.jobs[0]], [submitted.jobs[1]], [submitted.jobs[1]]
    ]  # fmt: skip


def test_a_refused_follow_up_stores_nothing(queue: JobQueue) -> None:
    def refuse_big(params: GenerationParams) -> None:
        if params.width > 512:
            raise UserError("too big for this model")

    request = NewJob(GenerationParams("a red fox", width=512, height=512), count=2)
    with pytest.raises(UserError, match="too big"):
        submit_with_follow_ups(queue, request, FollowUps(upscale=Upscale()), check=refuse_big)
    assert queue.jobs() == []


def test_a_follow_up_failing_in_the_transaction_rolls_its_parents_back(queue: JobQueue) -> None:
    def waits_for_a_missing_job(_parent: int, params: GenerationParams) -> list[NewJobs]:
        return [NewJobs([params], parents=[999])]

    with pytest.raises(InvalidDependency):
        queue.submit_linked(NewJobs([GenerationParams("a red fox")]), waits_for_a_missing_job)
    assert queue.jobs() == []


def test_follow_ups_of_a_stored_job_take_its_priority(queue: JobQueue) -> None:
    parent = queue.submit(GenerationParams("a red fox"), priority=5, max_attempts=2)
    follow_ups = FollowUps(upscale=Upscale(), variations=Variations(2))
    submitted = submit_with_follow_ups(queue, parent, follow_ups, source="cli")
    assert submitted.jobs == () and len(submitted.follow_ups) == 3
    children = [queue.get(i) for i in submitted.follow_ups]
    assert [(c.priority, c.max_attempts) for c in children] == [(5, 2)] * 3
    assert [c.strength for c in children] == [0.35, 0.3, 0.3]  # the upscale first
