"""PostgreSQL's claim as one server-side function (issue 41): one round trip a claim, the
window read through the queued jobs' index before the table's first ANALYZE, and the
worker row's models (`LoadsTaken`) and the peers' models read as the statements read them,
on both stores."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from sqlalchemy import insert, select, text

from app.engine.jobs.affinity import CLAIM_WINDOW
from app.engine.jobs.claim_function import LoadsTaken
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.tables import WORKER

pytestmark = pytest.mark.both_backends


def add_worker(queue: JobQueue, worker_id: str, listed: str, seen_at: float) -> None:
    row = {
        "id": worker_id, "machine": "m", "state": "idle", "started_at": seen_at,
        "last_seen_at": seen_at, "models": listed,
    }  # fmt: skip
    with queue.db.write() as conn:
        conn.execute(insert(WORKER).values(**row))


def listed_models(queue: JobQueue, worker_id: str) -> tuple[list[str], float]:
    query = select(WORKER.c.models, WORKER.c.last_seen_at).where(WORKER.c.id == worker_id)
    with queue.db.read() as conn:
        listed, seen_at = conn.execute(query).one()
    return json.loads(listed), seen_at


def test_loads_taken_writes_the_worker_row_in_the_claim_only_when_its_models_change(
    queue: JobQueue,
) -> None:
    for seed, model in enumerate("BAC"):
        queue.submit(GenerationParams("a cat", model=model, seed=seed))
    add_worker(queue, "wa", json.dumps(["A"]), 1.0)
    job = queue.claim("wa", models=["A"], row_models=LoadsTaken(("A",), 2))
    assert job is not None and job.model == "A"  # its own model first, the B passed over
    assert listed_models(queue, "wa") == (["A"], 1.0)  # the same set: the row is left
    job = queue.claim("wa", models=["A"], row_models=LoadsTaken(("A",), 2))
    assert job is not None and job.model == "B"
    assert listed_models(queue, "wa") == (["B", "A"], job.updated_at)
    job = queue.claim("wa", models=["B", "A"], row_models=LoadsTaken(("B", "A"), 1))
    assert job is not None and job.model == "C"
    assert listed_models(queue, "wa") == (["C"], job.updated_at)  # keeps one: C


def test_a_worker_row_that_is_not_a_json_list_of_names_holds_no_models(
    queue: JobQueue,
) -> None:
    """A damaged row is read as holding nothing; the strings of a list still count."""
    for seed, model in enumerate("ABC"):
        queue.submit(GenerationParams("a cat", model=model, seed=seed))
    now = queue.clock()
    add_worker(queue, "damaged", '["A", ', now)
    add_worker(queue, "mixed", '["B", 3, null]', now)
    add_worker(queue, "not-a-list", '{"C": 1}', now)
    taken = [queue.claim("wa") for _ in range(3)]
    assert [job.model for job in taken if job is not None] == ["A", "C"]  # B left to "mixed"
    assert taken[2] is None


@pytest.mark.postgresql_only
def test_a_claim_is_one_round_trip_to_the_server(queue: JobQueue) -> None:
    """The peers' models, the claims' lock, the claim, its history and the worker row's new
    models: one statement sent, one answer waited for."""
    for seed, model in enumerate("ABAB"):
        queue.submit(GenerationParams("a cat", model=model, seed=seed))
    add_worker(queue, "wa", json.dumps(["C"]), 1.0)
    add_worker(queue, "wb", json.dumps(["A"]), queue.clock())
    assert queue.claim("wa", models=["C"]) is not None  # the function exists from here on
    with counted_round_trips(queue) as round_trips:
        job = queue.claim("wa", models=["C"], row_models=LoadsTaken(("C",), 2))
    assert job is not None and job.model == "B"  # the A is left to "wb", which holds it
    assert listed_models(queue, "wa")[0] == ["B", "C"]
    assert round_trips() == 1


@contextmanager
def counted_round_trips(queue: JobQueue) -> Iterator[Callable[[], int]]:
    """How many times this thread's hot connection waited for the server: psycopg runs
    each exchange as a generator that yields while it waits for the socket (one that
    yields nothing, such as a commit with no transaction open, sent nothing)."""
    connection = queue.db.hot_connection().dbapi_connection
    waits = [0]
    wait = connection.wait

    def counting(exchange: Any, *args: Any, **kwargs: Any) -> Any:
        def watched() -> Any:
            answer, waited = None, False
            while True:
                try:
                    asked = exchange.send(answer)
                except StopIteration as done:
                    return done.value
                if not waited:
                    waits[0] += waited or 1
                    waited = True
                answer = yield asked

        return wait(watched(), *args, **kwargs)

    connection.wait = counting
    try:
        yield lambda: waits[0]
    finally:
        del connection.wait


@pytest.mark.postgresql_only
def test_the_claim_reads_its_window_alone_before_the_first_analyze(queue: JobQueue) -> None:
    """Before a table's first ANALYZE the planner guesses that a handful of jobs are
    queued: the claim read every queued job through a bitmap and sorted them all (27 ms a
    claim on 10,000 queued jobs), and walked them again for the passes. After a claimer's
    first claim the claim's statements, run inside the function, read about its window
    (auto_explain shows the plans of the statements a function runs)."""
    with queue.db.write() as conn:
        conn.execute(text("ALTER TABLE job SET (autovacuum_enabled = false)"))  # no ANALYZE
    queue.submit_many([GenerationParams("a cat", model="AB"[i % 2], seed=i) for i in range(600)])
    assert queue.claim("wa", models=["B"]) is not None  # the function exists from here on
    with explained(queue) as plans:
        assert queue.claim("wa", models=["B"]) is not None
    rows_read = sum(_rows_on(plan["Plan"], "job") for plan in plans)
    assert plans and rows_read <= 4 * CLAIM_WINDOW, f"the claim read {rows_read} job rows"


@contextmanager
def explained(queue: JobQueue) -> Iterator[list[dict[str, Any]]]:
    """The plans (EXPLAIN ANALYZE, JSON) of what this thread's hot connection runs, nested
    statements too: auto_explain's, sent to the client as notices."""
    connection = queue.db.hot_connection().dbapi_connection
    plans: list[dict[str, Any]] = []

    def noticed(diagnostic: Any) -> None:
        message = diagnostic.message_primary or ""
        if "plan:" in message:
            plans.append(json.loads(message.split("plan:", 1)[1]))

    settings = (
        "LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
        "SET auto_explain.log_analyze = on", "SET auto_explain.log_nested_statements = on",
        "SET auto_explain.log_format = json", "SET auto_explain.log_level = notice",
    )  # fmt: skip
    with connection.cursor() as cursor:
        try:
            for setting in settings:
                cursor.execute(setting)
        except psycopg.errors.InsufficientPrivilege:
            connection.rollback()
            pytest.skip("loading auto_explain needs a PostgreSQL superuser")
    connection.commit()
    connection.add_notice_handler(noticed)
    try:
        yield plans
    finally:
        connection.remove_notice_handler(noticed)
        with connection.cursor() as cursor:
            cursor.execute("SET auto_explain.log_min_duration = -1")
        connection.commit()


def _rows_on(node: dict[str, Any], table: str) -> int:
    own = 0
    if node.get("Relation Name") == table and "Scan" in node["Node Type"]:
        own = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
    return own + sum(_rows_on(child, table) for child in node.get("Plans", []))


@pytest.mark.postgresql_only
def test_where_the_function_cannot_be_created_claims_go_by_statements(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user without the right to create functions (`ensure_function` says False) still
    claims, model-aware, and writes its worker row, by the claim statement."""
    monkeypatch.setattr(type(queue.db.dialect), "ensure_function", lambda *_: False)
    for seed, model in enumerate("AB"):
        queue.submit(GenerationParams("a cat", model=model, seed=seed))
    add_worker(queue, "wa", json.dumps(["B"]), 1.0)
    job = queue.claim("wa", models=["B"], row_models=LoadsTaken(("B",), 2))
    assert job is not None and job.model == "B"
    job = queue.claim("wa", models=["B"], row_models=LoadsTaken(("B",), 2))
    assert job is not None and job.model == "A"
    assert listed_models(queue, "wa") == (["A", "B"], job.updated_at)
    with queue.db.read() as conn:
        assert (
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_proc WHERE proname LIKE 'easel_claim_%'"
                    " AND pronamespace = current_schema()::regnamespace"
                )
            ).scalar()
            == 0
        )
