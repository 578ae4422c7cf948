"""The PostgreSQL server the tests use, and a fresh schema per test on it.

`EASEL_TEST_PG_URL` names the server (`scripts/pg_test_server.sh start` prints one; `make
test` and `.ci/run` set it). Without it, PostgreSQL tests skip with that reason, except in
CI (`CI=true`), where a missing or unreachable server fails them: CI must never go green
by quietly running half the suite.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from sqlalchemy.engine import make_url

from app.errors import DatabaseError
from app.models.postgres import scratch_schema

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
    with ExitStack() as stack:
        try:
            url = stack.enter_context(scratch_schema(server_url()))
        except DatabaseError as error:
            _unavailable(f"the PostgreSQL test server cannot be used: {error}")
        yield url


@contextmanager
def location(backend: str, sqlite_file: str) -> Iterator[str]:
    """What `open_database` takes for a fresh store on `backend`."""
    if backend == "sqlite":
        yield sqlite_file
    else:
        with fresh_schema() as url:
            yield url


def without_password(location: str) -> tuple[str, str]:
    """(`location` without its password, the password): for tests of where libpq finds it."""
    url = make_url(location)
    return url._replace(password=None).render_as_string(hide_password=False), url.password or ""


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL: {reason}")
