"""Schema 13 -> 14 (job notes): a database with jobs gains the job_note table and keeps its
jobs and their timelines; on both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, inspect, text

from app.engine.jobs.notes import merged, notes_of
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database
from app.models.tables import JOB_NOTE


@pytest.mark.both_backends
def test_a_version_13_database_gains_job_notes_and_keeps_its_jobs(db_location: str) -> None:
    db = open_database(db_location)
    queue = JobQueue(db)
    old_job = queue.submit(GenerationParams("an old cat"))
    queue.cancel(old_job, source="test")
    with db.write() as conn:
        conn.execute(text("DROP TABLE job_note"))
        conn.execute(text("UPDATE schema_info SET version = 13"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION >= 14
        with db.read() as conn:
            assert "job_note" in inspect(conn).get_table_names()
        queue = JobQueue(db)
        timeline = queue.timeline(old_job)
        assert [t.event for t in timeline] == ["SUBMIT", "CANCEL"]
        assert notes_of(db, old_job) == []
        with db.write() as conn:
            values = {"job_id": old_job, "attempt": 1, "source": "callback",
                      "message": "told", "at": timeline[-1].at}  # fmt: skip
            conn.execute(insert(JOB_NOTE), values)
        rows = merged(timeline, notes_of(db, old_job))
        assert [getattr(row, "event", "note") for row in rows] == ["SUBMIT", "CANCEL", "note"]
    finally:
        db.dispose()
