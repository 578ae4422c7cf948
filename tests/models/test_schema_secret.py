"""Schema 14 -> 15 (queue_secret): a database with jobs gains the table of the queue's
secrets and keeps its jobs; servers starting at once make one callback secret between
them; on both backends."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import inspect, text

from app.engine.jobs.api_jobs import callback_secret
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database


@pytest.mark.both_backends
def test_a_version_14_database_gains_queue_secrets_and_keeps_its_jobs(db_location: str) -> None:
    db = open_database(db_location)
    old_job = JobQueue(db).submit(GenerationParams("an old cat"))
    with db.write() as conn:
        conn.execute(text("DROP TABLE queue_secret"))
        conn.execute(text("UPDATE schema_info SET version = 14"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION >= 15
        with db.read() as conn:
            assert "queue_secret" in inspect(conn).get_table_names()
        assert JobQueue(db).get(old_job).prompt == "an old cat"
    finally:
        db.dispose()


@pytest.mark.both_backends
def test_servers_starting_at_once_make_one_callback_secret(db_location: str) -> None:
    databases = [open_database(db_location) for _ in range(4)]
    start = threading.Barrier(len(databases))
    got: list[tuple[str, bool]] = []

    def make(index: int) -> None:
        start.wait()
        got.append(callback_secret(databases[index]))

    threads = [threading.Thread(target=make, args=(i,)) for i in range(len(databases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    try:
        assert len({secret for secret, _made in got}) == 1 and len(got) == 4
        assert sorted(made for _secret, made in got) == [False, False, False, True]
    finally:
        for db in databases:
            db.dispose()
