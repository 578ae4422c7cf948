"""Schema 20 -> 21 (an edit's several input images): a database with jobs gains
job.edit_images, its jobs reading as the one-image jobs they are; on both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, params_of
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database


@pytest.mark.both_backends
def test_a_version_20_database_gains_edit_images_and_keeps_its_jobs(db_location: str) -> None:
    db = open_database(db_location)
    old_job = JobQueue(db).submit(GenerationParams("an old cat"))
    with db.write() as conn:
        conn.execute(text("ALTER TABLE job DROP COLUMN edit_images"))
        conn.execute(text("UPDATE schema_info SET version = 20"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION >= 21
        with db.read() as conn:
            columns = {column["name"] for column in inspect(conn).get_columns("job")}
        assert "edit_images" in columns
        params = params_of(JobQueue(db).get(old_job))
        assert (params.prompt, params.edit_images) == ("an old cat", "")
        assert params.more_edit_images == ()
    finally:
        db.dispose()
