"""A database from before the worker table (schema 6) gains it, on both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from app.models.db import SCHEMA_VERSION, open_database, stored_schema_version


@pytest.mark.both_backends
def test_a_version_6_database_gains_the_worker_table(db_location: str) -> None:
    db = open_database(db_location)
    with db.write() as conn:
        conn.execute(text("DROP TABLE worker"))
        conn.execute(text("UPDATE schema_info SET version = 6"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION == 7
        with db.read() as conn:
            assert inspect(conn).has_table("worker")
            assert {"state", "request", "last_seen_at"} <= {
                column["name"] for column in inspect(conn).get_columns("worker")
            }
    finally:
        db.dispose()
