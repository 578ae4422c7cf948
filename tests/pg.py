"""The PostgreSQL server the tests use, and a fresh schema per test on it.

`EASEL_TEST_PG_URL` names the server (`scripts/pg_test_server.sh start` prints one; `make
test` and `.ci/run` set it). Without it, PostgreSQL tests skip with that reason, except in
CI (`CI=true`), where a missing or unreachable server fails them: CI must never go green
by quietly running half the suite.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

PG_URL_ENV = "EASEL_TEST_PG_URL"
BACKENDS = ("sqlite", "postgresql")


def server_url() -> str:
    """The test server's URL; skips (locally) or fails (CI) when there is none."""
    url = os.environ.get(PG_URL_ENV, "")
    if not url:
        _unavailable(f"{PG_URL_ENV} is not set (run `scripts/pg_test_server.sh start`)")
    return url


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A URL whose connections see only a new, empty schema; dropped afterwards.

    A schema, not a database: CREATE SCHEMA takes milliseconds, CREATE DATABASE most of a
    second, and the hypothesis machine wants a fresh store per example.
    """
    url = make_url(server_url())
    admin = create_engine(url.set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT")
    schema = f"t_{uuid.uuid4().hex[:16]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
    except OperationalError as error:
        admin.dispose()
        _unavailable(f"the PostgreSQL test server is unreachable: {error.orig}")
    try:
        scoped = url.update_query_dict({"options": f"-csearch_path={schema}"})
        yield scoped.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@contextmanager
def location(backend: str, sqlite_file: str) -> Iterator[str]:
    """What `open_database` takes for a fresh store on `backend`."""
    if backend == "sqlite":
        yield sqlite_file
    else:
        with fresh_schema() as url:
            yield url


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL: {reason}")
