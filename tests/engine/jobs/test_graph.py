"""Dependent jobs on a real SQLite file: BLOCKED, UNBLOCK, cascade cancel, reconciliation."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.jobs.follow_ups import submit_upscale, submit_variations
from app.engine.jobs.graph import (
    InputImageMissing,
    children_of,
    graph_listener,
    init_image_of,
    orphaned_children,
    parents_of,
    reconcile,
    waiting_reason,
)
from app.engine.jobs.graph_sql import InvalidDependency, cycle_through, digest
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.states import JobEvent, JobStatus, TransitionNotAllowed
from app.engine.workers.recovery import recover
from app.models.db import Database

S, E = JobStatus, JobEvent
PARAMS = GenerationParams("a red circle", steps=4, seed=3)


@pytest.fixture
def graph_queue(db: Database) -> JobQueue:
    """The queue as the app opens it: with the graph listener."""
    queue = JobQueue(db)
    queue.listeners.append(graph_listener(queue))
    return queue


def succeed(queue: JobQueue, job_id: int, output: str | None = None) -> None:
    job = queue.claim("w1", job_id=job_id)
    assert job is not None, f"job {job_id} was not claimable"
    changes = {"output_path": output} if output else None
    queue.fire(job_id, E.COMPLETE, source="worker", worker_id="w1", changes=changes)


def fail(queue: JobQueue, job_id: int, error: str) -> None:
    assert queue.claim("w1", job_id=job_id) is not None
    queue.fire(job_id, E.FAIL, source="worker", worker_id="w1", changes={"error": error})


def status(queue: JobQueue, job_id: int) -> str:
    return queue.get(job_id).status


def test_a_child_is_blocked_with_a_submit_after_row_naming_its_parents(
    graph_queue: JobQueue,
) -> None:
    a, b = graph_queue.submit(PARAMS), graph_queue.submit(PARAMS)
    child = graph_queue.submit(PARAMS, parents=[a, b, a])
    [row] = graph_queue.timeline(child)
    assert (row.from_status, row.to_status, row.event) == (None, "BLOCKED", "SUBMIT_AFTER")
    assert row.message == f"waits for #{a}, #{b}"
    assert parents_of(graph_queue, child) == [a, b]
    assert children_of(graph_queue, a) == [child]
    assert graph_queue.claim("w1") is not None and graph_queue.claim("w2") is not None
    assert graph_queue.claim("w3") is None  # a BLOCKED job is never claimed


def test_the_child_unblocks_only_when_every_parent_succeeded(graph_queue: JobQueue) -> None:
    a, b = graph_queue.submit(PARAMS), graph_queue.submit(PARAMS)
    child = graph_queue.submit(PARAMS, parents=[a, b])
    succeed(graph_queue, a)
    assert status(graph_queue, child) == "BLOCKED"
    assert waiting_reason(graph_queue, child) == f"waiting for #{b} (pending)"
    succeed(graph_queue, b)
    assert status(graph_queue, child) == "PENDING"
    last = graph_queue.timeline(child)[-1]
    assert (last.event, last.source, last.message) == (
        "UNBLOCK", "graph", f"every parent succeeded (#{a}, #{b})",
    )  # fmt: skip


def test_unblock_is_refused_while_a_parent_has_not_succeeded(graph_queue: JobQueue) -> None:
    parent = graph_queue.submit(PARAMS)
    child = graph_queue.submit(PARAMS, parents=[parent])
    with pytest.raises(TransitionNotAllowed, match=f"waiting for #{parent}"):
        graph_queue.fire(child, E.UNBLOCK, source="user")
    assert graph_queue.get(child).version == 0


def test_a_child_of_finished_parents_unblocks_at_once(graph_queue: JobQueue) -> None:
    parent = graph_queue.submit(PARAMS)
    succeed(graph_queue, parent)
    child = graph_queue.submit(PARAMS, parents=[parent])
    assert [t.to_status for t in graph_queue.timeline(child)] == ["BLOCKED", "PENDING"]


def test_unknown_and_cancelled_parents_are_refused_and_nothing_is_stored(
    graph_queue: JobQueue,
) -> None:
    parent = graph_queue.submit(PARAMS)
    with pytest.raises(InvalidDependency, match="there is no job 999 to wait for"):
        graph_queue.submit_many([PARAMS, PARAMS], parents=[parent, 999])
    graph_queue.cancel(parent)
    with pytest.raises(InvalidDependency, match=f"job {parent} was cancelled"):
        graph_queue.submit(PARAMS, parents=[parent])
    assert [job.id for job in graph_queue.jobs()] == [parent]


def test_a_cycle_is_found_with_its_path() -> None:
    edges = {1: [2], 2: [3], 3: []}
    assert cycle_through(3, [1], lambda job: edges[job]) == [3, 1, 2, 3]
    assert cycle_through(4, [1], lambda job: edges[job]) == []
    assert cycle_through(5, [5], lambda job: []) == [5, 5]


def test_cancelling_a_parent_cancels_its_blocked_descendants_naming_the_parent(
    graph_queue: JobQueue,
) -> None:
    parent = graph_queue.submit(PARAMS)
    child = graph_queue.submit(PARAMS, parents=[parent])
    grandchild = graph_queue.submit(PARAMS, parents=[child])
    other = graph_queue.submit(PARAMS)
    graph_queue.cancel(parent)
    for job_id, named in ((child, parent), (grandchild, child)):
        last = graph_queue.timeline(job_id)[-1]
        assert (last.from_status, last.to_status, last.event) == ("BLOCKED", "CANCELLED", "CANCEL")
        assert last.message == f"parent #{named} was cancelled"
        assert len(graph_queue.timeline(job_id)) == 2
    assert status(graph_queue, other) == "PENDING"


def test_a_failed_parent_leaves_the_child_blocked_and_its_retry_carries_on(
    graph_queue: JobQueue,
) -> None:
    parent = graph_queue.submit(PARAMS)
    child = graph_queue.submit(PARAMS, parents=[parent])
    fail(graph_queue, parent, "RuntimeError: the model broke")
    assert status(graph_queue, child) == "BLOCKED"
    assert waiting_reason(graph_queue, child) == (
        f"waiting for #{parent}, which failed: RuntimeError: the model broke"
    )
    graph_queue.mark_given_up(parent, "gave up after 3 of 3 attempts")
    assert "which was given up: gave up after 3" in waiting_reason(graph_queue, child)
    graph_queue.retry(parent)
    succeed(graph_queue, parent)
    assert status(graph_queue, child) == "PENDING"
    assert waiting_reason(graph_queue, child) == ""


def test_reconcile_unblocks_a_child_stranded_by_a_crash(db: Database) -> None:
    """The parent's SUCCESS committed, the app died before the listener ran."""
    crashed = JobQueue(db)  # no graph listener: the UNBLOCK never happens
    parent = crashed.submit(PARAMS)
    child = crashed.submit(PARAMS, parents=[parent])
    cancelled_parent = crashed.submit(PARAMS)
    cancelled_child = crashed.submit(PARAMS, parents=[cancelled_parent])
    succeed(crashed, parent)
    crashed.cancel(cancelled_parent)
    assert status(crashed, child) == "BLOCKED"
    assert orphaned_children(db) == 2

    report = reconcile(crashed)
    assert (report.unblocked, report.cancelled) == ([child], [cancelled_child])
    assert crashed.timeline(child)[-1].source == "reconcile"
    assert orphaned_children(db) == 0
    assert reconcile(crashed).unblocked == []  # idempotent: nothing left to do


def test_launch_recovery_unblocks_stranded_children(db: Database, tmp_path: Path) -> None:
    crashed = JobQueue(db)
    parent = crashed.submit(PARAMS)
    child = crashed.submit(PARAMS, parents=[parent])
    succeed(crashed, parent)
    report = recover(
        JobQueue(db), liveness_dir=tmp_path, heartbeat_timeout_s=5, policy=RetryPolicy()
    )
    assert report.unblocked == [child]
    assert f"unblocked: #{child}" in report.lines()
    assert status(crashed, child) == "PENDING"


def test_orphaned_children_counts_a_child_that_ran_before_its_parent(db: Database) -> None:
    queue = JobQueue(db)
    parent = queue.submit(PARAMS)
    queue.submit(PARAMS, parents=[parent])
    assert orphaned_children(db) == 0
    with db.write() as conn:  # what a lost-update bug would do
        conn.exec_driver_sql("UPDATE job SET status = 'PENDING' WHERE id != ?", (parent,))
    assert orphaned_children(db) == 1


def test_upscale_and_variations_name_their_parent_and_wait_for_it(
    graph_queue: JobQueue,
) -> None:
    parent = graph_queue.submit(GenerationParams("a cat", width=64, height=48, seed=9, steps=10))
    upscale = graph_queue.get(submit_upscale(graph_queue, parent, scale=2, strength=0.4))
    assert (upscale.width, upscale.height, upscale.seed, upscale.prompt) == (128, 96, 9, "a cat")
    assert (upscale.init_image, upscale.strength, upscale.status) == (
        f"job:{parent}", 0.4, "BLOCKED",
    )  # fmt: skip
    assert upscale.progress_total == 4  # img2img runs 40% of the 10 steps
    variations = submit_variations(graph_queue, parent, count=3, strength=0.3)
    seeds = {graph_queue.get(v).seed for v in variations}
    assert len(seeds) == 3 and 9 not in seeds
    assert children_of(graph_queue, parent) == sorted([upscale.id or 0, *variations])


def test_a_parent_image_that_is_gone_fails_naming_the_file(
    graph_queue: JobQueue, tmp_path: Path
) -> None:
    image = tmp_path / "000001-3.png"
    image.write_bytes(b"png bytes")
    parent = graph_queue.submit(PARAMS)
    child = submit_upscale(graph_queue, parent)
    succeed(graph_queue, parent, output=str(image))
    assert init_image_of(graph_queue, graph_queue.get(child)) == b"png bytes"
    image.unlink()
    with pytest.raises(InputImageMissing, match=f"{image} \\(the output of job {parent}\\)"):
        init_image_of(graph_queue, graph_queue.get(child))


def test_an_uploaded_init_image_is_stored_with_its_job(graph_queue: JobQueue) -> None:
    png = b"uploaded png"
    params = GenerationParams("a cat", init_image=digest(png), strength=0.5, steps=4)
    job_id = graph_queue.submit(params, inputs=RunInputs(init_image=png))
    assert init_image_of(graph_queue, graph_queue.get(job_id)) == png
    with pytest.raises(InvalidParameters, match="do not match"):
        graph_queue.submit(params, inputs=RunInputs(init_image=b"other bytes"))
    with pytest.raises(InvalidParameters, match="needs its bytes"):
        graph_queue.submit(params)


def test_a_rerun_keeps_its_parents_and_its_stored_init_image(
    graph_queue: JobQueue, tmp_path: Path
) -> None:
    parent = graph_queue.submit(PARAMS)
    (tmp_path / "parent.png").write_bytes(b"parent png")
    succeed(graph_queue, parent, output=str(tmp_path / "parent.png"))
    upscale = submit_upscale(graph_queue, parent)
    png = b"uploaded png"
    params = GenerationParams("a cat", init_image=digest(png), strength=0.5, steps=4)
    uploaded = graph_queue.submit(params, inputs=RunInputs(init_image=png))
    for job_id in (upscale, uploaded):
        graph_queue.cancel(job_id)
        again = graph_queue.get(graph_queue.rerun(job_id))
        assert (again.init_image, again.status) == (graph_queue.get(job_id).init_image, "PENDING")
        assert parents_of(graph_queue, again.id or 0) == parents_of(graph_queue, job_id)
        assert init_image_of(graph_queue, again) == init_image_of(
            graph_queue, graph_queue.get(job_id)
        )


def test_the_init_parent_must_be_a_parent(graph_queue: JobQueue) -> None:
    other = graph_queue.submit(PARAMS)
    params = GenerationParams("a cat", init_image=f"job:{other}", strength=0.5, steps=4)
    with pytest.raises(InvalidDependency, match=f"job {other} is not a parent"):
        graph_queue.submit(params)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"init_image": "job:x"}, "does not name a job number"),
        ({"init_image": "file:/tmp/a.png"}, "is neither"),
        ({"init_image": "job:1", "strength": 0.0}, "strength must be above 0"),
        ({"init_image": "job:1", "strength": 1.5}, "strength must be above 0"),
        ({"init_image": "job:1", "strength": 0.1, "steps": 5}, "leaves no step to run"),
    ],
)
def test_img2img_parameters_are_checked(changes: dict[str, object], message: str) -> None:
    params = GenerationParams("a cat", **changes)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameters, match=message):
        params.validated()
