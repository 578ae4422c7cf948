"""libpq's password file as Easel writes it (issue 14.6): private, escaped, one line per
server, and read back by libpq itself on a real connection."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from app.errors import DatabaseError
from app.models.opening import open_database
from app.models.pgpass import PASSFILE_ENV, PasswordRefused, has_password, remember_password
from tests import pg


@pytest.fixture
def passfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "secrets" / "pgpass"
    monkeypatch.setenv(PASSFILE_ENV, str(path))
    return path


def test_the_file_is_private_and_in_libpq_format(passfile: Path) -> None:
    url = make_url("postgresql://ana@studio:5433/easel")
    assert remember_password(url, "s3cret") == passfile
    assert passfile.read_text() == "studio:5433:easel:ana:s3cret\n"
    if os.name == "posix":
        assert stat.S_IMODE(passfile.stat().st_mode) == 0o600


def test_defaults_are_filled_in_as_libpq_would(passfile: Path) -> None:
    remember_password(make_url("postgresql://ana@/easel"), "pw")
    assert passfile.read_text() == "localhost:5432:easel:ana:pw\n"


def test_colons_and_backslashes_are_escaped(passfile: Path) -> None:
    remember_password(make_url("postgresql://ana@studio/easel"), r"a:b\c")
    assert passfile.read_text() == "studio:5432:easel:ana:a\\:b\\\\c\n"


def test_a_new_password_replaces_the_old_line_and_keeps_every_other(passfile: Path) -> None:
    passfile.parent.mkdir()
    passfile.write_text("# mine\nother:5432:db:bob:x\nstudio:5432:easel:ana:old\n*:*:*:*:any\n")
    remember_password(make_url("postgresql://ana@studio/easel"), "new")
    assert passfile.read_text().splitlines() == [
        "studio:5432:easel:ana:new",  # first: it wins over the wildcard line
        "# mine", "other:5432:db:bob:x", "*:*:*:*:any",
    ]  # fmt: skip


def test_has_password_matches_like_libpq(passfile: Path) -> None:
    ana = make_url("postgresql://ana@studio/easel")
    assert not has_password(ana)
    passfile.parent.mkdir()
    passfile.write_text("studio:*:easel:ana:x\n# studio:5432:other:ana:x\n")
    assert has_password(ana)
    assert not has_password(make_url("postgresql://ana@studio/other"))  # a comment only
    assert not has_password(make_url("postgresql://bob@studio/easel"))


@pytest.mark.parametrize("password", ["", "two\nlines"])
def test_a_password_libpq_could_not_read_back_is_refused(passfile: Path, password: str) -> None:
    with pytest.raises(PasswordRefused):
        remember_password(make_url("postgresql://ana@studio/easel"), password)
    assert not passfile.exists()


def test_libpq_logs_in_with_the_saved_password(
    passfile: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pg.fresh_schema() as location:
        bare, password = pg.without_password(location)
        with pytest.raises(DatabaseError, match="password"):
            open_database(bare).dispose()
        remember_password(make_url(bare), password)
        open_database(bare).dispose()
