"""The command line on a shared PostgreSQL: --db, `db copy`, and one clear line when the
server cannot be used."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlmodel import SQLModel

from app.cli import main
from app.cli.jobs import EXIT_REFUSED, EXIT_STORE
from app.engine.jobs.graph import init_image_of, parents_of
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.paths import database_path
from app.engine.settings import InvalidSettings, Settings
from app.engine.store.opening import open_queue
from app.models.migrations import SCHEMA_VERSION, SchemaTooNew
from app.models.opening import open_database
from app.models.pgpass import PASSFILE_ENV
from app.models.postgres import COPIED_TABLES, NOT_COPIED
from tests import pg


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pg.fresh_schema() as url:
        yield url


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_db_copy_moves_jobs_and_history_and_new_ids_follow_on(
    capsys: pytest.CaptureFixture[str], pg_url: str
) -> None:
    local = open_queue()
    first = local.submit(GenerationParams("a red circle", seed=1, steps=3))
    local.submit(GenerationParams("a blue square", seed=4_000_000_000, steps=3))
    assert local.claim("w1") is not None
    local.pause(first)
    local.fire(first, JobEvent.STOPPED, source="worker", worker_id="w1")
    local.cancel(first)
    rerun = local.rerun(first)
    before = {job.id or 0: job for job in local.jobs()}
    timelines = {job_id: local.timeline(job_id) for job_id in before}
    local.db.dispose()

    code, out, err = run_cli(capsys, "db", "copy", "--to", pg_url)

    assert code == 0, err
    assert "copied 3 jobs, " in out and "easel-test" not in out  # never the password
    shared = JobQueue(open_database(pg_url))
    try:
        assert {job.id or 0: job for job in shared.jobs()} == before
        assert {job_id: shared.timeline(job_id) for job_id in before} == timelines
        assert shared.get(rerun).rerun_of == first
        assert shared.submit(GenerationParams("next", seed=5)) == rerun + 1
    finally:
        shared.db.dispose()


def test_db_copy_keeps_a_chain_waiting_on_its_parent_and_an_init_image(
    capsys: pytest.CaptureFixture[str], pg_url: str
) -> None:
    """Issue 21 item 6: parent links and stored init images travel with their jobs."""
    local = open_queue()
    parent = local.submit(GenerationParams("a red circle", seed=1, steps=3))
    child = local.submit(GenerationParams("its upscale", seed=2, steps=3), parents=[parent])
    png = b"\x89PNG an uploaded init image"
    params = GenerationParams("a cat", init_image=digest(png), strength=0.5, steps=4, seed=3)
    uploaded = local.submit(params, inputs=RunInputs(init_image=png))
    local.db.dispose()

    code, out, err = run_cli(capsys, "db", "copy", "--to", pg_url)

    assert code == 0, err
    assert "copied 3 jobs, 3 history rows, 1 parent links, 1 init images and " in out
    shared = open_queue(pg_url)  # with the graph listener, as every process opens it
    try:
        assert init_image_of(shared, shared.get(uploaded)) == png
        assert parents_of(shared, child) == [parent]
        assert shared.get(child).status == JobStatus.BLOCKED
        assert shared.claim("w1", job_id=parent) is not None
        shared.fire(parent, JobEvent.COMPLETE, source="worker", worker_id="w1")
        assert shared.get(child).status == JobStatus.PENDING  # unblocked, not waiting for ever
        assert shared.submit(GenerationParams("next", seed=5), parents=[child]) == uploaded + 1
    finally:
        shared.db.dispose()


def test_db_copy_names_every_table_it_leaves_behind() -> None:
    """A table added later must be copied, or be named here as not the user's data."""
    tables = {table.name for table in SQLModel.metadata.sorted_tables}
    assert tables == {table.name for table in COPIED_TABLES} | NOT_COPIED


def test_db_copy_refuses_a_database_that_already_holds_jobs(
    capsys: pytest.CaptureFixture[str], pg_url: str
) -> None:
    open_queue().submit(GenerationParams("local", seed=1))
    shared = JobQueue(open_database(pg_url))
    shared.submit(GenerationParams("already there", seed=1))
    code, _, err = run_cli(capsys, "db", "copy", "--to", pg_url)
    assert code == EXIT_STORE
    assert err.count("\n") == 1 and "already holds jobs" in err
    assert [job.prompt for job in shared.jobs()] == ["already there"]
    shared.db.dispose()


def test_the_global_db_option_points_every_command_at_postgresql(
    capsys: pytest.CaptureFixture[str], pg_url: str
) -> None:
    code, out, _ = run_cli(capsys, "--db", pg_url, "submit", "a green hill", "--seed", "3")
    assert code == 0
    job_id = int(out.strip().splitlines()[-1])
    shared = JobQueue(open_database(pg_url))
    assert shared.get(job_id).prompt == "a green hill"
    shared.db.dispose()
    local = open_queue(database_path())
    assert local.jobs() == []  # nothing went to the local file
    local.db.dispose()


def _with(url: str, **changes: Any) -> str:
    return make_url(url).set(**changes).render_as_string(hide_password=False)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"password": "wrong"}, "password for user easel was refused"),
        ({"database": "no_such_db"}, "the database no_such_db does not exist"),
        ({"port": 1}, "cannot be reached"),
    ],
)
def test_a_database_that_cannot_be_used_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], pg_url: str, change: dict[str, Any], expected: str
) -> None:
    url = _with(pg_url, **change)
    code, _, err = run_cli(capsys, "--db", url, "jobs")
    assert code == EXIT_STORE
    assert err.count("\n") == 1 and expected in err, err
    assert "wrong" not in err and "easel-test" not in err  # passwords are never shown


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://easel:secret@studio:port/easel", "is not a database URL"),
        ("postgresql://easel:secret@studio:5432", "names no database"),
    ],
)
def test_a_malformed_url_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], url: str, expected: str
) -> None:
    code, _, err = run_cli(capsys, "--db", url, "jobs")
    assert code == EXIT_STORE
    assert err.count("\n") == 1 and expected in err, err
    assert "secret" not in err


def test_a_database_of_a_newer_easel_is_refused_and_left_alone(
    capsys: pytest.CaptureFixture[str], pg_url: str
) -> None:
    db = open_database(pg_url)
    with db.write() as conn:
        conn.execute(text("UPDATE schema_info SET version = :v"), {"v": SCHEMA_VERSION + 1})
    db.dispose()
    code, _, err = run_cli(capsys, "--db", pg_url, "jobs")
    assert code == EXIT_STORE
    assert err.count("\n") == 1 and "newer Easel" in err and "--db" in err
    with pytest.raises(SchemaTooNew):
        open_database(pg_url)  # still the newer version: nothing was migrated or dropped


def test_settings_never_hold_a_database_password() -> None:
    with pytest.raises(InvalidSettings, match="PGPASSWORD"):
        Settings(database_url="postgresql://easel:secret@db.local/easel").validated()
    assert Settings(database_url="postgresql://easel@db.local/easel").validated()


def test_db_password_keeps_a_password_that_works_and_refuses_one_that_does_not(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    pg_url: str,
) -> None:
    passfile = tmp_path / "pgpass"
    monkeypatch.setenv(PASSFILE_ENV, str(passfile))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    bare, password = pg.without_password(pg_url)
    monkeypatch.setattr("sys.stdin", io.StringIO("wrong\n"))
    code, _, err = run_cli(capsys, "--db", bare, "db", "password")
    assert code == EXIT_STORE and "refused" in err and not passfile.exists()
    monkeypatch.setattr("sys.stdin", io.StringIO(password + "\n"))
    code, out, _ = run_cli(capsys, "--db", bare, "db", "password")
    assert code == 0 and str(passfile) in out and password not in out
    code, out, _ = run_cli(capsys, "--db", bare, "jobs")  # libpq now finds it by itself
    assert code == 0


def test_db_password_needs_a_shared_database(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "db", "password")
    assert code == EXIT_REFUSED and "--db" in err
