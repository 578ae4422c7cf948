"""Schema 17 -> 18 (video jobs): a database with jobs gains job.frames and job.fps, its
jobs reading as the one-frame image jobs they are; on both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, params_of
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database


@pytest.mark.both_backends
def test_a_version_17_database_gains_frames_and_fps_and_keeps_its_jobs(db_location: str) -> None:
    db = open_database(db_location)
    old_job = JobQueue(db).submit(GenerationParams("an old cat"))
    with db.write() as conn:
        for column in ("frames", "fps"):
            conn.execute(text(f"ALTER TABLE job DROP COLUMN {column}"))
        conn.execute(text("UPDATE schema_info SET version = 17"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION >= 18
        with db.read() as conn:
            columns = {column["name"] for column in inspect(conn).get_columns("job")}
        assert {"frames", "fps"} <= columns
        params = params_of(JobQueue(db).get(old_job))
        assert (params.prompt, params.kind, params.frames, params.fps) == (
            "an old cat", "generate", 1, 16,
        )  # fmt: skip
    finally:
        db.dispose()
