"""Schema 19 -> 20 (a job's schedule over its model's, a few-step LoRA's): a database with
jobs gains job.scheduler_config, its jobs running on their models' own schedules; a new job
keeps the schedule it was given; on both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, params_of
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database

TRAILING = '{"timestep_spacing": "trailing"}'


@pytest.mark.both_backends
def test_a_version_19_database_gains_scheduler_config_and_keeps_its_jobs(
    db_location: str,
) -> None:
    db = open_database(db_location)
    old_job = JobQueue(db).submit(GenerationParams("an old cat"))
    with db.write() as conn:
        conn.execute(text("ALTER TABLE job DROP COLUMN scheduler_config"))
        conn.execute(text("UPDATE schema_info SET version = 19"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION >= 20
        queue = JobQueue(db)
        assert params_of(queue.get(old_job)).scheduler_config == ""
        new_job = queue.submit(GenerationParams("a fast cat", scheduler_config=TRAILING))
        assert params_of(queue.get(new_job)).scheduler_config == TRAILING
    finally:
        db.dispose()
