"""A database from before images and checkpoints were stored (schema 5) gains `job_file`."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from app.models.db import SCHEMA_VERSION, open_database, stored_schema_version


@pytest.mark.both_backends
def test_a_version_5_database_gains_the_file_table(db_location: str) -> None:
    db = open_database(db_location)
    with db.write() as conn:
        conn.execute(text("DROP TABLE job_file"))
        conn.execute(text("UPDATE schema_info SET version = 5"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION
        with db.read() as conn:
            assert inspect(conn).has_table("job_file")
    finally:
        db.dispose()
