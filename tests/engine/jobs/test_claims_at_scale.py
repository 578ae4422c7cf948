"""What keeps a model-aware claim cheap on a studio's queue (issue 41): the window read
through the queued jobs' index whatever the planner believes of the table, a SQLite claim
that does not wait for the disk, and odd model names through the claim and the worker
rows it writes, on both stores."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import inspect, select, text, update

from app.engine.jobs.affinity import CLAIM_WINDOW, MAX_HELD, MAX_PEERS, model_slots
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.workers.presence import Presence
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database
from app.models.tables import JOB, WORKER

pytestmark = pytest.mark.both_backends

# Quotes of both kinds, a backslash, JSON's and SQL's specials, letters outside ASCII.
ODD_MODELS = ('it\'s "quoted"', "back\\slash; DROP TABLE job;--", "naïve/模型 🎨", "%s ? $1")


def test_odd_model_names_go_through_the_claim_and_the_worker_rows_unchanged(
    queue: JobQueue,
) -> None:
    """A worker holding an odd name takes its job first, writes the names it holds to its
    row as they are, and a peer reading that row leaves those models to it."""
    for seed, model in enumerate(ODD_MODELS):
        queue.submit(GenerationParams("a cat", model=model, seed=seed))
    for worker_id in ("wa", "wb"):
        Presence(queue.db, worker_id, "m").register(device=None)
    holder = ODD_MODELS[2]
    job = queue.claim("wa", models=[holder], row_models=lambda model: [model, ODD_MODELS[3]])
    assert job is not None and job.model == holder
    assert queue.get(job.id or 0).model == holder
    with queue.db.read() as conn:
        listed = conn.execute(select(WORKER.c.models).where(WORKER.c.id == "wa")).scalar_one()
    assert json.loads(listed) == [holder, ODD_MODELS[3]]
    assert queue.models_held()[ODD_MODELS[3]] == ["wa"]
    # Another worker holding nothing leaves "wa"'s ODD_MODELS[3] to it: it takes the others.
    taken = [queue.claim("wb") for _ in range(2)]
    assert sorted(j.model for j in taken if j is not None) == sorted(ODD_MODELS[:2])
    assert queue.claim("wb") is None  # the last one waits for "wa" (its bound not reached)
    last = queue.claim("wa", models=[ODD_MODELS[3]])
    assert last is not None and last.model == ODD_MODELS[3]


@pytest.mark.sqlite_only
def test_a_sqlite_claim_commits_without_waiting_for_the_disk_and_other_writes_still_do(
    queue: JobQueue,
) -> None:
    """The claim's commit is not synced (a power cut that undoes it also ended the worker
    that made it, and the job is simply queued again); the connection is back to FULL for
    the worker's next commit, which syncs the claim with it."""
    queue.submit(GenerationParams("a cat", model="A"))
    raw = queue.db.hot_connection()

    def level() -> int:
        return int(raw.execute("PRAGMA synchronous").fetchone()[0])

    seen_in_claim: list[int] = []

    def row_models(model: str) -> list[str]:  # called inside the claim's transaction
        seen_in_claim.append(level())
        return [model]

    assert level() == 2  # FULL
    job = queue.claim("wa", models=["A"], row_models=row_models)
    assert job is not None and seen_in_claim == [1]  # NORMAL
    assert level() == 2
    assert queue.heartbeat(job.id or 0, "wa")  # a write after it: synced as before


@pytest.mark.postgresql_only  # SQLite's plan: test_affinity_claims
def test_the_claim_reads_the_window_alone_when_the_statistics_say_all_jobs_are_queued(
    queue: JobQueue,
) -> None:
    """PostgreSQL picks a plan by its statistics: taken while every job was queued, they
    made it walk the primary key from the oldest job, past every job claimed since, for the
    window and for the passes. The claim must read about its window whatever they say.
    (SQLite's plan: test_affinity_claims.)"""
    queued, claimed = 1200, 1000
    for first in range(0, queued, 400):
        queue.submit_many(
            [
                GenerationParams("a cat", model="AB"[i % 2], seed=i)
                for i in range(first, first + 400)
            ]
        )
    with queue.db.write() as conn:
        conn.execute(text("ANALYZE job"))  # as autovacuum would, with every job queued
        oldest = conn.execute(select(JOB.c.id).order_by(JOB.c.id).limit(claimed)).scalars().all()
        conn.execute(update(JOB).where(JOB.c.id.in_(oldest)).values(status="PROCESSING"))
    rows_read = _claim_rows_read(queue, held=["B"])
    assert rows_read <= 4 * CLAIM_WINDOW, f"the claim read {rows_read} rows of the job table"


def _claim_rows_read(queue: JobQueue, held: list[str]) -> int:
    """The rows of the job table the claim statement read (returned or filtered out), from
    EXPLAIN ANALYZE in a transaction rolled back."""
    statement = queue._sql.claim_next_with_history
    assert statement is not None
    params: dict[str, Any] = {"now": queue.clock(), "worker_id": "wa", "source": "worker"}
    params.update(max_skips=8, max_wait_s=60.0, message="claimed")
    params.update(model_slots("held", tuple(held), MAX_HELD))
    params.update(model_slots("peer", (), MAX_PEERS))
    values = [
        params.get(name, statement.fixed_values.get(name)) for name in statement.parameter_names
    ]
    raw = queue.db.engine.raw_connection()
    try:
        cursor = queue.db.dialect.numbered_cursor(raw.cursor())
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement.sql, values)
        [[plan]] = cursor.fetchall()
    finally:
        raw.rollback()
        raw.close()
    return _rows_on(plan[0]["Plan"], "job")


def _rows_on(node: dict[str, Any], table: str) -> int:
    own = 0
    if node.get("Relation Name") == table and "Scan" in node["Node Type"]:
        own = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
    return own + sum(_rows_on(child, table) for child in node.get("Plans", []))


def test_a_version_18_database_gains_the_queued_jobs_index_and_claims_from_it(
    db_location: str,
) -> None:
    db = open_database(db_location)
    job_id = JobQueue(db).submit(GenerationParams("an old cat", model="A"))
    with db.write() as conn:
        conn.execute(text("DROP INDEX ix_job_queue"))
        conn.execute(text("UPDATE schema_info SET version = 18"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION
        with db.read() as conn:
            assert "ix_job_queue" in {index["name"] for index in inspect(conn).get_indexes("job")}
        job = JobQueue(db).claim("wa", models=["B"])
        assert job is not None and job.id == job_id
    finally:
        db.dispose()
