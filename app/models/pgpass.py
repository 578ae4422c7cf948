"""libpq's password file: where a PostgreSQL password lives, instead of Easel's settings.

Every libpq client on the machine (Easel's window, its headless workers, psql) finds the
password there by itself, so the settings file and the logs never hold it. The format is
libpq's: one `host:port:database:user:password` line per server, `:` and `\\` escaped with
a backslash, the first matching line wins, and on Unix the file must be private (0600) or
libpq ignores it.
"""

from __future__ import annotations

import getpass
import os
import tempfile
from pathlib import Path

from sqlalchemy.engine import URL

from app.durable import fsync_folder

PASSFILE_ENV = "PGPASSFILE"
DEFAULT_PORT = 5432
WILDCARD = "*"
PRIVATE = 0o600


class PasswordRefused(ValueError):
    """A password libpq could not read back from its file."""


def passfile_path() -> Path:
    """Where libpq looks: $PGPASSFILE, else its per-user default."""
    if chosen := os.environ.get(PASSFILE_ENV):
        return Path(chosen)
    if os.name == "nt":
        return Path(os.environ.get("APPDATA", Path.home())) / "postgresql" / "pgpass.conf"
    return Path.home() / ".pgpass"


def remember_password(url: URL, password: str) -> Path:
    """Save `password` for the server, database and user of `url`; returns the file.

    The line goes first, replacing the one for the same four fields, so it wins over any
    wildcard line further down; every other line is kept as it was.
    """
    if not password or any(c in password for c in "\r\n\0"):
        raise PasswordRefused("a password must be one line, not empty")
    key = _key(url)
    path = passfile_path()
    kept = [line for line in _lines(path) if tuple(_fields(line)[:4]) != key]
    entry = ":".join(_escape(field) for field in (*key, password))
    _write_private(path, [entry, *kept])
    return path


def has_password(url: URL) -> bool:
    """Whether the password file holds a line libpq would use for `url`."""
    key = _key(url)
    return any(_matches(_fields(line), key) for line in _lines(passfile_path()))


def _key(url: URL) -> tuple[str, str, str, str]:
    """The four fields libpq matches, with the defaults it would fill in."""
    return (
        url.host or "localhost",
        str(url.port or DEFAULT_PORT),
        url.database or "",
        url.username or getpass.getuser(),
    )


def _matches(fields: list[str], key: tuple[str, ...]) -> bool:
    if len(fields) != 5:
        return False  # libpq skips lines it cannot parse
    return all(field in (WILDCARD, wanted) for field, wanted in zip(fields[:4], key, strict=True))


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line for line in text.splitlines() if line.strip()]


def _fields(line: str) -> list[str]:
    """The line's fields, unescaped; comments have none."""
    if line.lstrip().startswith("#"):
        return []
    fields: list[str] = []
    current: list[str] = []
    escaped = False
    for char in line:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ":" and len(fields) < 4:
            fields.append("".join(current))
            current = []
        else:
            current.append(char)
    fields.append("".join(current))
    return fields


def _escape(field: str) -> str:
    return field.replace("\\", "\\\\").replace(":", "\\:")


def _write_private(path: Path, lines: list[str]) -> None:
    """Write then rename, readable by this user only from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".pgpass-", dir=path.parent)
    try:
        os.chmod(temporary, PRIVATE)  # mkstemp already makes it 0600; say it, for Windows too
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as file:
            file.write("\n".join(lines) + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        fsync_folder(path.parent)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
