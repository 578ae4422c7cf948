"""Schema 22 -> 23 (a clip's images weighed): a database with jobs gains job.image_strength,
last_image_strength and last_image_frame, its jobs reading with stock's (1, 1, the clip's
last frame). On both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from app.engine.jobs.params import LAST_FRAME, GenerationParams
from app.engine.jobs.queue import JobQueue, params_of
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database

COLUMNS = ("image_strength", "last_image_strength", "last_image_frame")


@pytest.mark.both_backends
def test_a_version_22_database_gains_the_strengths_and_keeps_its_jobs(db_location: str) -> None:
    db = open_database(db_location)
    old_job = JobQueue(db).submit(GenerationParams("an old cat"))
    with db.write() as conn:
        for column in COLUMNS:
            conn.execute(text(f"ALTER TABLE job DROP COLUMN {column}"))
        conn.execute(text("UPDATE schema_info SET version = 22"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION >= 23
        with db.read() as conn:
            columns = {column["name"] for column in inspect(conn).get_columns("job")}
        assert set(COLUMNS) <= columns
        params = params_of(JobQueue(db).get(old_job))
        assert params.prompt == "an old cat"
        assert (params.image_strength, params.last_image_strength) == (1.0, 1.0)
        assert params.last_image_frame == LAST_FRAME and not params.has_condition_settings
    finally:
        db.dispose()
