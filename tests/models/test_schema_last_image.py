"""Schema 21 -> 22 (first-and-last-frame clips): a database with jobs gains job.last_image,
its jobs reading as clips and images without one; on both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, params_of
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database


@pytest.mark.both_backends
def test_a_version_21_database_gains_last_image_and_keeps_its_jobs(db_location: str) -> None:
    db = open_database(db_location)
    old_job = JobQueue(db).submit(GenerationParams("an old cat"))
    with db.write() as conn:
        conn.execute(text("ALTER TABLE job DROP COLUMN last_image"))
        conn.execute(text("UPDATE schema_info SET version = 21"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION >= 22
        with db.read() as conn:
            columns = {column["name"] for column in inspect(conn).get_columns("job")}
        assert "last_image" in columns
        params = params_of(JobQueue(db).get(old_job))
        assert (params.prompt, params.last_image) == ("an old cat", "")
    finally:
        db.dispose()
