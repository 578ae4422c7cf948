"""A database from before a table or column existed gains it when opened, on both backends:
the file table (schema 5 -> 6), the worker table (6 -> 7), the job's pending cancel
(7 -> 8), the server's tables (8 -> 9), the affinity counts (9 -> 10) and the groups of jobs
(11 -> 12); masks (10 -> 11) are in test_schema_masks.py."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.undo import Hold, hold_for_undo
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("table", "version", "columns"),
    [("job_file", 5, set()), ("worker", 6, {"state", "request", "last_seen_at"})],
)
def test_a_database_from_before_a_table_gains_it(
    db_location: str, table: str, version: int, columns: set[str]
) -> None:
    db = open_database(db_location)
    with db.write() as conn:
        conn.execute(text(f"DROP TABLE {table}"))
        conn.execute(text("UPDATE schema_info SET version = :v"), {"v": version})
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION
        with db.read() as conn:
            assert inspect(conn).has_table(table)
            assert columns <= {column["name"] for column in inspect(conn).get_columns(table)}
    finally:
        db.dispose()


@pytest.mark.both_backends
def test_a_version_7_database_gains_the_pending_cancel_and_keeps_its_jobs(
    db_location: str,
) -> None:
    db = open_database(db_location)
    job_id = JobQueue(db).submit(GenerationParams("an old cat"))
    with db.write() as conn:
        conn.execute(text("ALTER TABLE job DROP COLUMN cancel_after"))
        conn.execute(text("UPDATE schema_info SET version = 7"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION
        queue = JobQueue(db)
        assert queue.get(job_id).cancel_after is None  # nothing was pending before
        assert hold_for_undo(queue, job_id, cancel_after=123.0) is Hold.QUEUED
        assert queue.get(job_id).cancel_after == 123.0
    finally:
        db.dispose()


@pytest.mark.both_backends
def test_a_version_8_database_gains_the_server_tables_and_keeps_its_jobs(
    db_location: str,
) -> None:
    from app.engine.jobs.queue import NewJobs
    from app.engine.jobs.request_keys import RequestKey

    db = open_database(db_location)
    job_id = JobQueue(db).submit(GenerationParams("an old cat"))
    with db.write() as conn:
        conn.execute(text("DROP TABLE request_key"))
        conn.execute(text("DROP TABLE api_job"))
        conn.execute(text("UPDATE schema_info SET version = 8"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION
        with db.read() as conn:
            assert {"request_key", "api_job"} <= set(inspect(conn).get_table_names())
        queue = JobQueue(db)
        assert queue.get(job_id).prompt == "an old cat"
        key = RequestKey("k-1", "f")
        first = queue.submit_keyed(NewJobs([GenerationParams("a new cat")]), key=key)
        again = queue.submit_keyed(NewJobs([GenerationParams("a new cat")]), key=key)
        assert again.replayed and again.jobs == first.jobs != [job_id]
    finally:
        db.dispose()


@pytest.mark.both_backends
def test_a_version_9_database_gains_the_affinity_counts_and_worker_models_and_keeps_its_jobs(
    db_location: str,
) -> None:
    db = open_database(db_location)
    queue = JobQueue(db)
    older = queue.submit(GenerationParams("an old cat", model="B"))
    newer = queue.submit(GenerationParams("an old dog", model="A"))
    with db.write() as conn:
        for table, column in [
            ("job", "passed_over"),
            ("job", "passed_over_at"),
            ("worker", "models"),
        ]:
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(text("UPDATE schema_info SET version = 9"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION
        queue = JobQueue(db)
        assert (queue.get(older).passed_over, queue.get(older).passed_over_at) == (0, None)
        job = queue.claim("w", models=["A"])  # the affinity claim runs on the upgraded table
        assert job is not None and job.id == newer and queue.get(older).passed_over == 1
        with db.read() as conn:
            assert "models" in {column["name"] for column in inspect(conn).get_columns("worker")}
    finally:
        db.dispose()


@pytest.mark.both_backends
def test_a_version_11_database_gains_groups_and_keeps_its_jobs(db_location: str) -> None:
    db = open_database(db_location)
    queue = JobQueue(db)
    parent = queue.submit(GenerationParams("an old cat", seed=3))
    child = queue.submit(GenerationParams("its child", seed=4), parents=[parent])
    with db.write() as conn:
        conn.execute(text("DROP INDEX ix_job_group"))
        for column in ("variation_seed", "variation_strength", "prompt_template", "kind",
                       "upscaler", "group_id", "group_cell"):  # fmt: skip
            conn.execute(text(f"ALTER TABLE job DROP COLUMN {column}"))
        conn.execute(text("ALTER TABLE job_parent DROP COLUMN settled"))
        conn.execute(text("DROP TABLE job_group"))
        conn.execute(text("UPDATE schema_info SET version = 11"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION
        queue = JobQueue(db)
        old = queue.get(parent)
        assert (old.prompt, old.seed, old.kind, old.group_id) == ("an old cat", 3, "generate", None)
        assert (old.variation_seed, old.variation_strength, old.upscaler) == (-1, 0.0, "")
        assert queue.get(child).status == "BLOCKED"
        with db.read() as conn:
            assert inspect(conn).has_table("job_group")
            edges = conn.execute(text("SELECT job_id, parent_id, settled FROM job_parent"))
            assert [tuple(row) for row in edges] == [(child, parent, False)]
        from app.engine.jobs.groups import SeedMode, submit_batch

        batch = submit_batch(queue, GenerationParams("new cats", seed=7), 2, SeedMode.INCREMENT)
        assert [queue.get(j).group_id for j in batch.jobs] == [batch.group_id] * 2
    finally:
        db.dispose()
