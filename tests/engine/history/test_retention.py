"""Retention: prune removes exactly the old finished jobs, never one it must keep."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.history.retention import RetentionRule, prune
from app.engine.jobs.notes import notes_of
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.models.opening import open_database
from tests.engine.history.conftest import JOB_SPECS, JobSpec, insert_jobs

NOW = 200_000.0
S = JobStatus


def may_go(spec: JobSpec) -> bool:
    """The rule, written out: finished for good and not a favourite."""
    finished = spec.status in (S.SUCCESS, S.CANCELLED) or (
        spec.status in (S.FAILED, S.TIMEOUT) and spec.given_up
    )
    return finished and not spec.starred


def expected_removals(ids: list[int], specs: list[JobSpec], rule: RetentionRule) -> set[int]:
    candidates = [(i, s) for i, s in zip(ids, specs, strict=True) if may_go(s)]
    gone: set[int] = set()
    if rule.older_than_s is not None:
        cutoff = NOW - rule.older_than_s
        gone |= {i for i, s in candidates if s.finished_at is not None and s.finished_at < cutoff}
    if rule.keep is not None:
        # Newest first by finish time (never finished: last), then by id.
        ranked = sorted(
            candidates,
            key=lambda c: (c[1].finished_at is not None, c[1].finished_at or 0.0, c[0]),
            reverse=True,
        )
        gone |= {i for i, _ in ranked[rule.keep :]}
    return gone


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(JOB_SPECS, min_size=1, max_size=25),
    older_than=st.one_of(st.none(), st.floats(0.0, 250_000.0)),
    keep=st.one_of(st.none(), st.integers(0, 10)),
    dry_run=st.booleans(),
)
def test_prune_removes_exactly_what_the_rule_allows(
    specs: list[JobSpec], older_than: float | None, keep: int | None, dry_run: bool
) -> None:
    rule = RetentionRule(older_than, keep)
    with tempfile.TemporaryDirectory() as folder:
        db = open_database(Path(folder) / "easel.db")
        ids = insert_jobs(db, specs)
        report = prune(JobQueue(db), rule, dry_run=dry_run, now=NOW)
        with db.read() as conn:
            left = set(conn.exec_driver_sql("SELECT id FROM job").scalars())
            with_history = set(conn.exec_driver_sql("SELECT job_id FROM job_transition").scalars())
        db.dispose()
    expected = expected_removals(ids, specs, rule)
    assert set(report.removed) == expected
    assert report.history_rows == sum(
        s.history_rows for i, s in zip(ids, specs, strict=True) if i in expected
    )
    kept = set(ids) if dry_run else set(ids) - expected
    assert left == kept
    assert with_history == kept  # a removed job's history goes with it, nobody else's


def test_prune_removes_checkpoints_and_only_with_images_the_image(tmp_path: Path) -> None:
    db = open_database(tmp_path / "easel.db")
    queue = JobQueue(db)
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    files = {}
    for job_id in (queue.submit(GenerationParams("a")), queue.submit(GenerationParams("b"))):
        image, checkpoint = tmp_path / f"{job_id}.png", checkpoints / f"job-{job_id}-a1-c3.ckpt"
        image.write_bytes(b"x" * 1000)
        checkpoint.write_bytes(b"y" * 500)
        files[job_id] = (image, checkpoint)
        queue.cancel(job_id)
        with db.write() as conn:  # fixture: the image it had made before
            conn.exec_driver_sql(
                "UPDATE job SET output_path = ? WHERE id = ?", (str(image), job_id)
            )
            conn.exec_driver_sql(  # and a note in its timeline (a callback's try)
                "INSERT INTO job_note (job_id, attempt, source, message, at) "
                "VALUES (?, 1, 'callback', 'told', 0)", (job_id,)
            )  # fmt: skip
    [first, second] = files

    report = prune(queue, RetentionRule(keep=1), checkpoints_dir=checkpoints)
    assert report.removed == [first]
    assert notes_of(db, first) == [] and len(notes_of(db, second)) == 1  # notes go with it
    assert files[first][0].exists() and not files[first][1].exists()
    assert files[second][0].exists() and files[second][1].exists()
    assert report.file_bytes == 500

    report = prune(queue, RetentionRule(keep=0), checkpoints_dir=checkpoints, images=True)
    assert report.removed == [second] and report.file_bytes == 1500
    assert not any(path.exists() for path in files[second])
    db.dispose()


def test_a_job_held_by_a_worker_is_skipped_with_a_message(tmp_path: Path) -> None:
    db = open_database(tmp_path / "easel.db")
    queue = JobQueue(db, clock=lambda: 1_000.0)
    job_id = queue.submit(GenerationParams("an old job"))
    queue.claim("host:1:abc")
    report = prune(queue, RetentionRule(older_than_s=60), now=10_000.0)
    assert report.removed == []
    assert report.skipped == [f"job {job_id} is held by worker host:1:abc (PROCESSING); skipped"]
    assert queue.get(job_id).status == "PROCESSING"
    db.dispose()


def test_the_database_gets_smaller_after_a_large_prune(tmp_path: Path) -> None:
    db = open_database(tmp_path / "easel.db")
    queue = JobQueue(db)
    ids = queue.submit_many([GenerationParams("a long prompt " * 40)] * 400)
    for job_id in ids:
        queue.cancel(job_id)
    report = prune(queue, RetentionRule(keep=0))
    assert len(report.removed) == 400
    assert report.db_bytes_after < report.db_bytes_before / 2
    db.dispose()


def test_a_parent_whose_child_stays_is_kept_and_a_pruned_child_takes_its_edges(
    tmp_path: Path,
) -> None:
    db = open_database(tmp_path / "easel.db")
    queue = JobQueue(db)
    parent = queue.submit(GenerationParams("a castle"))
    child = queue.submit(GenerationParams("a castle, upscaled"), parents=[parent])
    queue.cancel(parent)
    queue.cancel(child)
    with db.write() as conn:  # fixture: the child is a favourite, so it stays
        conn.exec_driver_sql("UPDATE job SET starred = 1 WHERE id = ?", (child,))
    report = prune(queue, RetentionRule(keep=0))
    assert report.removed == []
    assert f"job {parent} is a parent of job {child}; kept" in report.skipped
    with db.write() as conn:
        conn.exec_driver_sql("UPDATE job SET starred = 0 WHERE id = ?", (child,))
    assert prune(queue, RetentionRule(keep=0)).removed == [parent, child]
    with db.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM job_parent").scalar_one() == 0
    db.dispose()


def test_delete_jobs_removes_the_chosen_jobs_with_their_images_and_keeps_a_starred_one(
    tmp_path: Path,
) -> None:
    """The gallery's Delete: the chosen finished jobs go with their images and history; a
    starred one, and a job that may still run, stay, each with its reason."""
    from app.engine.history.favourites import star
    from app.engine.history.retention import delete_jobs

    db = open_database(tmp_path / "easel.db")
    queue = JobQueue(db)
    images = {}
    for prompt in ("a", "b", "c"):
        job_id = queue.submit(GenerationParams(prompt))
        claimed = queue.claim("w")
        assert claimed is not None and claimed.id == job_id
        image = tmp_path / f"{job_id}.png"
        image.write_bytes(b"x" * 100)
        queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id="w",
                   changes={"output_path": str(image)})  # fmt: skip
        images[job_id] = image
    first, second, third = images
    star(queue, second)
    waiting = queue.submit(GenerationParams("d"))

    report = delete_jobs(queue, [first, second, waiting], checkpoints_dir=tmp_path)
    assert report.removed == [first]
    assert report.skipped == [f"job {second} is starred; kept", f"job {waiting} is PENDING; kept"]
    assert not images[first].exists() and images[second].exists() and images[third].exists()
    assert [job.id for job in queue.jobs([S.SUCCESS], limit=None)] == [third, second]
    with db.read() as conn:
        history = conn.exec_driver_sql("SELECT job_id FROM job_transition").scalars().all()
    assert first not in history and second in history
    db.dispose()
