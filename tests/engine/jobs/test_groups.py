"""Groups of jobs: batches with seed modes, group actions through the table, a grid's
composer waiting for its cells to be settled, and recomposing after a late cell."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.engine.jobs.graph import graph_listener, reconcile, waiting_reason
from app.engine.jobs.groups import (
    Group,
    GroupAction,
    SeedMode,
    act_on_group,
    batch_seeds,
    group_info,
    recompose_if_stale,
    recompose_stale,
    retry_member,
    submit_batch,
    submit_members,
)
from app.engine.jobs.params import KIND_GRID, GenerationParams, InvalidParameters
from app.engine.jobs.queue import JobQueue, StoredJobs
from app.engine.jobs.request_keys import KeyReused, RequestKey, fingerprint_of, internal_key
from app.engine.jobs.states import JobEvent, JobStatus

pytestmark = pytest.mark.both_backends
S = JobStatus
P = GenerationParams("a cat", steps=2, seed=10)


@pytest.fixture
def q(queue: JobQueue) -> JobQueue:
    queue.listeners.append(graph_listener(queue))
    return queue


def finish(
    queue: JobQueue, job_id: int, event: JobEvent = JobEvent.COMPLETE, **changes: object
) -> None:
    claimed = queue.claim("w", job_id=job_id)
    assert claimed is not None
    queue.fire(job_id, event, source="worker", worker_id="w", changes=changes)


def test_seed_modes() -> None:
    rng = random.Random(1)
    assert [p.seed for p in batch_seeds(P, 3, SeedMode.INCREMENT)] == [10, 11, 12]
    assert [p.seed for p in batch_seeds(P, 3, SeedMode.FIXED)] == [10, 10, 10]
    randoms = [p.seed for p in batch_seeds(GenerationParams("x"), 4, SeedMode.RANDOM, rng)]
    assert len(set(randoms)) == 4 and all(s >= 0 for s in randoms)
    one = [p.seed for p in batch_seeds(GenerationParams("x"), 3, SeedMode.INCREMENT, rng)]
    assert one == [one[0], one[0] + 1, one[0] + 2]
    varied = GenerationParams("x", seed=5, variation_seed=-1, variation_strength=0.2)
    subs = [p.variation_seed for p in batch_seeds(varied, 2, SeedMode.INCREMENT, rng)]
    assert subs[0] >= 0 and subs[1] == subs[0] + 1
    with pytest.raises(InvalidParameters, match="batch count must be between 1 and 100"):
        batch_seeds(P, 0, SeedMode.FIXED)


def test_a_batch_is_one_group_of_ordinary_jobs(q: JobQueue) -> None:
    group = submit_batch(q, P, 3, SeedMode.INCREMENT)
    info = group_info(q, group.group_id)
    assert info.kind == "batch" and info.label == "3 of 'a cat'"
    assert [(j.id, j.group_cell, j.seed, j.status) for j in info.members] == [
        (group.jobs[0], 0, 10, "PENDING"), (group.jobs[1], 1, 11, "PENDING"),
        (group.jobs[2], 2, 12, "PENDING"),
    ]  # fmt: skip


def test_a_refused_member_stores_nothing(q: JobQueue) -> None:
    def refuse_big(params: GenerationParams) -> None:
        if params.seed == 11:
            raise InvalidParameters("seed 11 is refused")

    with pytest.raises(InvalidParameters, match="seed 11"):
        submit_batch(q, P, 3, SeedMode.INCREMENT, check=refuse_big)
    assert q.jobs() == []


def test_group_actions_go_through_the_table_and_skip_what_they_do_not_apply_to(
    q: JobQueue,
) -> None:
    group = submit_batch(q, P, 3, SeedMode.INCREMENT)
    first, running, third = group.jobs
    finish(q, first)
    assert q.claim("w2", job_id=running) is not None
    moved = act_on_group(q, group.group_id, GroupAction.PAUSE)
    assert {r.job_id: r.to_status for r in moved} == {running: S.PAUSING, third: S.PAUSED}
    assert q.get(first).status == S.SUCCESS  # finished: left alone
    assert act_on_group(q, group.group_id, GroupAction.PAUSE) == []  # already satisfied
    assert q.timeline(third)[-1].message == f"pause group {group.group_id}"
    moved = act_on_group(q, group.group_id, GroupAction.CANCEL)
    assert {r.job_id: r.to_status for r in moved} == {running: S.CANCELLING, third: S.CANCELLED}


def test_group_retry_retries_failed_members(q: JobQueue) -> None:
    group = submit_batch(q, P, 2, SeedMode.INCREMENT)
    failed, ok = group.jobs
    finish(q, failed, JobEvent.FAIL, error="boom", error_transient=False)
    finish(q, ok)
    moved = act_on_group(q, group.group_id, GroupAction.RETRY)
    assert [(r.job_id, r.to_status) for r in moved] == [(failed, S.PENDING)]
    assert q.get(failed).attempt == 2


def grid(q: JobQueue, cells: int = 3) -> tuple[int, tuple[int, ...], int]:
    batch = [GenerationParams("a cat", steps=2 + i, seed=1) for i in range(cells)]
    composer = GenerationParams("a cat", steps=2, seed=1, kind=KIND_GRID)
    made = submit_members(q, batch, "grid", "steps", spec={"axes": []}, composer=composer)
    assert made.composer is not None
    return made.group_id, made.jobs, made.composer


def test_a_grid_waits_for_its_cells_to_be_settled_not_to_succeed(q: JobQueue) -> None:
    _group, (a, b, c), composer = grid(q)
    assert q.get(composer).status == S.BLOCKED
    finish(q, a)
    q.cancel(b)  # a cancelled cell does not cancel the grid: it becomes a placeholder
    assert q.get(composer).status == S.BLOCKED
    assert f"#{c}" in waiting_reason(q, composer)
    finish(q, c, JobEvent.FAIL, error="transient", error_transient=True)
    assert q.get(composer).status == S.BLOCKED  # it will be retried: not settled yet
    q.mark_given_up(c, "gave up after 3 attempts")
    assert q.get(composer).status == S.BLOCKED  # no transition: reconciliation sees it
    assert reconcile(q).unblocked == [composer]
    assert q.get(composer).status == S.PENDING


def test_a_lasting_failure_settles_the_cell_at_once(q: JobQueue) -> None:
    _group, (a, b, c), composer = grid(q)
    finish(q, a)
    finish(q, b)
    finish(q, c, JobEvent.FAIL, error="bad model", error_transient=False)
    assert q.get(composer).status == S.PENDING
    assert "is settled" in q.timeline(composer)[-1].message


def test_cancelling_the_group_cancels_the_grid_first(q: JobQueue) -> None:
    group_id, cells, composer = grid(q)
    act_on_group(q, group_id, GroupAction.CANCEL)
    assert [q.get(j).status for j in (*cells, composer)] == ["CANCELLED"] * 4


def test_retrying_a_cancelled_cell_after_the_grid_was_made_recomposes_it(q: JobQueue) -> None:
    group_id, (a, b, c), composer = grid(q)
    finish(q, a)
    q.cancel(b)
    finish(q, c)
    finish(q, composer)  # composed with a placeholder for b
    again = retry_member(q, b)  # cancelled: re-run into its cell
    assert again != b and q.get(again).group_cell == 1 and q.get(again).group_id == group_id
    finish(q, again)
    info = group_info(q, group_id)
    [new_composer] = [j.id for j in info.members if j.kind == KIND_GRID and j.id != composer]
    assert q.get(new_composer or 0).rerun_of == composer
    assert q.get(new_composer or 0).status == S.PENDING  # every newest cell is settled
    from app.engine.jobs.graph import parents_of

    assert parents_of(q, new_composer or 0) == [a, c, again]


def test_reconciliation_recomposes_a_grid_whose_reaction_was_lost(queue: JobQueue) -> None:
    # No listener: the late cell's success is never reacted to.
    _group_id, (a, b, c), composer = grid(queue)
    for job in (a, b, c):
        finish(queue, job)
    reconcile(queue)
    finish(queue, composer)
    again = queue.rerun(b)
    finish(queue, again)
    report = reconcile(queue)
    assert len(report.recomposed) == 1
    assert reconcile(queue).recomposed == []  # queued once


def test_a_grid_found_stale_by_two_at_once_is_queued_again_once(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A late cell's success and the reconciliation (another process's, say) both find the
    grid stale before either queues it again: one new composer, not two (a grid composed
    twice, the second waiting for nothing, was seen in CI)."""
    group_id, (a, b, c), composer = grid(queue)
    for job in (a, b, c):
        finish(queue, job)
    reconcile(queue)  # the cells are settled: the composer may run
    finish(queue, composer)
    again = queue.rerun(b)
    finish(queue, again)  # no listener: nothing has reacted to it yet
    both_decided = threading.Barrier(2)
    rerun_keyed = queue.rerun_keyed

    def after_both_decided(job_id: int, **kwargs: object) -> StoredJobs:
        both_decided.wait(timeout=30)
        return rerun_keyed(job_id, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(queue, "rerun_keyed", after_both_decided)
    with ThreadPoolExecutor(2) as pool:
        reacting = pool.submit(recompose_if_stale, queue, again)
        reconciling = pool.submit(recompose_stale, queue)
        made = [reacting.result(timeout=60), *reconciling.result(timeout=60)]
    assert len([m for m in made if m is not None]) == 1
    composers = [m.id for m in group_info(queue, group_id).members if m.kind == KIND_GRID]
    assert len(composers) == 2 and queue.get(composers[-1] or 0).rerun_of == composer


def test_a_client_cannot_take_one_of_easels_own_keys() -> None:
    own = internal_key("recompose after grid job 1")
    with pytest.raises(InvalidParameters, match="printable"):
        RequestKey(own.key, own.fingerprint)


def test_a_keyed_group_is_stored_once_with_its_rows_and_a_replay_answers_the_first(
    q: JobQueue,
) -> None:
    """What the HTTP API needs of a batch or grid: its Idempotency-Key and its record of
    who asked, written in the group's own transaction."""
    written: list[list[int]] = []
    key = RequestKey("grid-1", fingerprint_of({"grid": 1}))
    batch = [GenerationParams("a cat", steps=2 + i, seed=1) for i in range(2)]
    composer = GenerationParams("a cat", steps=2, seed=1, kind=KIND_GRID)

    def submit() -> Group:
        return submit_members(
            q, batch, "grid", "steps", composer=composer, key=key,
            with_jobs=lambda _tx, ids: written.append(ids),
        )  # fmt: skip

    first, again = submit(), submit()
    assert not first.replayed and again.replayed
    assert (again.group_id, again.jobs, again.composer) == (
        first.group_id, first.jobs, first.composer,
    )  # fmt: skip
    assert written == [[*first.jobs, first.composer]]  # the replay wrote nothing
    assert len(q.jobs(None, limit=10)) == 3
    other = RequestKey("grid-1", fingerprint_of({"grid": 2}))
    with pytest.raises(KeyReused, match="already used for a different request"):
        submit_members(q, batch, "grid", "steps", composer=composer, key=other)
