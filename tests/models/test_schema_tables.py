"""A database from before a table existed gains it when opened, on both backends: the file
table (schema 5 -> 6) and the worker table (schema 6 -> 7)."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

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
        assert stored_schema_version(db) == SCHEMA_VERSION == 7
        with db.read() as conn:
            assert inspect(conn).has_table(table)
            assert columns <= {column["name"] for column in inspect(conn).get_columns(table)}
    finally:
        db.dispose()
