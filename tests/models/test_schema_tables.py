"""A database from before a table or column existed gains it when opened, on both backends:
the file table (schema 5 -> 6), the worker table (6 -> 7) and the job's pending cancel
(7 -> 8)."""

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
        assert stored_schema_version(db) == SCHEMA_VERSION == 10
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
        assert stored_schema_version(db) == SCHEMA_VERSION == 10
        queue = JobQueue(db)
        assert queue.get(job_id).cancel_after is None  # nothing was pending before
        assert hold_for_undo(queue, job_id, cancel_after=123.0) is Hold.QUEUED
        assert queue.get(job_id).cancel_after == 123.0
    finally:
        db.dispose()
