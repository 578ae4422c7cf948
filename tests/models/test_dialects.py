"""The database's one seam: a `Dialect` per store, chosen when it is opened.

`Database` asks its dialect for what differs between SQLite and PostgreSQL; these tests pin
what each dialect does there, on real stores, and that the models modules import one
another in one direction only (no circle dodged by an import inside a function).
"""

from __future__ import annotations

import ast
import fcntl
import os
import sqlite3
import time
from contextlib import closing
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.errors import DatabaseError, DatabaseLocked
from app.models.db import Database, check_database, compact, numbered_placeholders
from app.models.opening import open_database
from app.models.postgres import NOTIFY_SQL, PostgresDialect
from app.models.sqlite import TRIM_JOURNAL_EVERY_S, WRITERS_LINE_SUFFIX, SqliteDialect
from tests import pg
from tests.faults import write_lock_held

MODELS = Path(__file__).resolve().parents[2] / "app" / "models"


def models_imports(source: Path) -> tuple[set[str], list[str]]:
    """(the models modules `source` imports at module level, those it imports in a def)."""
    tree = ast.parse(source.read_text(), str(source))
    top_level = {id(node) for node in tree.body}
    at_top: set[str] = set()
    nested: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "app.models":
                names = [alias.name for alias in node.names]
            elif node.module.startswith("app.models."):
                names = [node.module.removeprefix("app.models.")]
        elif isinstance(node, ast.Import):
            names = [
                alias.name.removeprefix("app.models.")
                for alias in node.names
                if alias.name.startswith("app.models.")
            ]
        (at_top.update if id(node) in top_level else nested.extend)(names)
    return at_top, nested


def test_the_models_modules_import_one_another_one_way_only() -> None:
    graph: dict[str, set[str]] = {}
    hidden: dict[str, list[str]] = {}
    for source in sorted(MODELS.glob("*.py")):
        at_top, nested = models_imports(source)
        graph[source.stem] = at_top | set(nested)
        if nested:
            hidden[source.stem] = nested
    # The one import inside a function: the PostgreSQL driver, loaded only to open a URL
    # (the window opens a SQLite file, and psycopg was a tenth of its start-up).
    assert hidden == {"opening": ["postgres"]}, "imports inside functions (a circle dodged?)"
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        pytest.fail(f"models modules import in a circle: {error.args[1]}")
    # The seam's direction: the portable core knows no store; the opener knows both.
    assert graph["db"].isdisjoint({"sqlite", "postgres", "migrations", "opening"})
    assert {"sqlite", "postgres"} <= graph["opening"]


@pytest.mark.both_backends
def test_the_store_kind_is_chosen_once_when_the_database_is_opened(
    db: Database, db_location: str
) -> None:
    if db.is_sqlite:
        assert isinstance(db.dialect, SqliteDialect)
        assert (db.shares_files, db.dialect.notify_sql) == (False, None)
    else:
        assert isinstance(db.dialect, PostgresDialect)
        assert (db.shares_files, db.dialect.notify_sql) == (True, NOTIFY_SQL)
    assert db.location == db_location
    again = open_database(db.location)  # what a worker process does with it
    try:
        assert type(again.dialect) is type(db.dialect)
    finally:
        again.dispose()


def version_seen(db: Database, watch: Connection) -> int:
    with watch.begin():
        return db.data_version(watch)


def test_sqlite_polls_a_data_version_that_moves_with_other_connections_commits(
    tmp_path: Path,
) -> None:
    db = open_database(tmp_path / "jobs.db")
    other = open_database(tmp_path / "jobs.db")
    try:
        with db.read_only_connection() as watch:  # one transaction per look, as the window
            before = version_seen(db, watch)
            assert version_seen(db, watch) == before  # nothing committed: no news
            JobQueue(other).submit(GenerationParams("a moth, ink"))
            assert version_seen(db, watch) != before
    finally:
        other.dispose()
        db.dispose()


def wal_size(path: Path) -> int:
    return Path(f"{path}-wal").stat().st_size


def test_sqlite_trims_its_journal_at_idle_at_most_every_few_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "jobs.db"
    db = open_database(path)
    queue = JobQueue(db)
    try:
        queue.submit_many([GenerationParams(f"a pier number {i}, fog") for i in range(50)])
        assert wal_size(path) > 0
        db.trim_journal()
        assert wal_size(path) == 0
        queue.submit(GenerationParams("one more pier"))
        db.trim_journal()  # straight after the last trim: postponed
        assert wal_size(path) > 0
        later = time.monotonic() + TRIM_JOURNAL_EVERY_S + 1
        monkeypatch.setattr(time, "monotonic", lambda: later)
        db.trim_journal()
        assert wal_size(path) == 0
    finally:
        db.dispose()


def test_postgresql_leaves_its_journal_pages_and_space_to_the_server() -> None:
    with pg.fresh_schema() as location:
        db = open_database(location)
        try:
            JobQueue(db).submit(GenerationParams("a harbour, gouache"))
            check_database(db)  # SQLite's quick_check would be a syntax error here
            compact(db)
            db.trim_journal()
            with (
                db.read() as conn,
                pytest.raises(NotImplementedError, match="only available on SQLite"),
            ):
                db.data_version(conn)
            assert db.refusal is None and len(JobQueue(db).jobs()) == 1
        finally:
            db.dispose()


class RecordingSqlite(SqliteDialect):
    """The real SQLite dialect, noting what `Database` asks of it on the hot path."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def set_up_hot_connection(self, raw: Any) -> None:
        self.asked.append("set up")
        super().set_up_hot_connection(raw)

    def begin_hot_write(self, cursor: Any, lock_timeout_s: float | None) -> None:
        self.asked.append(f"begin {lock_timeout_s}")
        super().begin_hot_write(cursor, lock_timeout_s)

    def translate(self, error: BaseException, db: Database) -> DatabaseError | None:
        self.asked.append(f"translate {type(error).__name__}")
        return super().translate(error, db)


def test_a_hot_write_asks_its_dialect_to_begin_and_to_translate_a_held_lock(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.db"
    open_database(path).dispose()  # the schema
    engine = open_database(path, lock_timeout_s=0.2).engine  # the SQLite engine, set up
    dialect = RecordingSqlite()
    db = Database(engine, dialect, path=path, lock_timeout_s=0.2)
    try:
        JobQueue(db).submit(GenerationParams("a gull, pencil"))
        with (
            write_lock_held(path),
            pytest.raises(DatabaseLocked, match=r"locked by another program for more than 0\.2 s"),
            db.hot_write(),
        ):
            pass
    finally:
        db.dispose()
    # One hot connection set up once; each write begun with the lock patience given.
    assert dialect.asked[0] == "set up" and dialect.asked.count("set up") == 1
    assert dialect.asked.count("begin 0.2") >= 2
    assert dialect.asked[-1] == "translate OperationalError"
    with closing(sqlite3.connect(path)) as plain:  # the refused write wrote nothing
        assert plain.execute("SELECT COUNT(*) FROM job").fetchone() == (1,)


def test_long_postgresql_statements_are_numbered_once_per_name_and_percent_signs_kept() -> None:
    sql = "UPDATE job SET at = %s WHERE worker_id = %s AND at < %s AND note LIKE 'x%%'"
    assert numbered_placeholders(sql, ("now", "worker_id", "now")) == (
        "UPDATE job SET at = $1 WHERE worker_id = $2 AND at < $1 AND note LIKE 'x%'",
        ("now", "worker_id"),
    )


def test_the_postgresql_claim_is_sent_numbered_past_the_drivers_statement_cache() -> None:
    with pg.fresh_schema() as location:
        queue = JobQueue(open_database(location))
        try:
            statement = queue._sql.claim_next_with_history
            assert statement is not None and statement.numbered
            assert "%s" not in statement.sql  # no conversion left for the driver to do
            queue.submit(GenerationParams("a cat", seed=1))
            job = queue.claim("w1", models=["m"])
            assert job is not None and job.worker_id == "w1"
        finally:
            queue.db.dispose()


def test_a_patient_sqlite_databases_hot_writers_wait_in_line_on_a_file_lock(
    tmp_path: Path,
) -> None:
    """Each hot write holds the line (an flock beside the file) until its commit, so the
    next waiter is woken at once rather than polling for SQLite's lock (`WritersLine`)."""
    path = tmp_path / "easel.db"
    db = open_database(path, lock_timeout_s=None)
    try:
        with db.hot_write():
            line = os.open(f"{path}{WRITERS_LINE_SUFFIX}", os.O_RDWR)
            with pytest.raises(BlockingIOError):
                fcntl.flock(line, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(line, fcntl.LOCK_EX | fcntl.LOCK_NB)  # let go after the commit
        os.close(line)
    finally:
        db.dispose()
