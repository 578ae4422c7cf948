"""Who may use the HTTP API, as far as the window and the settings need to know: the stored
token and the host names a user lets the server answer to.

Here, not in app/server, because the window shows the token in Settings and checks the names
a user types without loading the web stack. The token lives in its own file
(`<data>/server-token`, mode 0600), never in settings.json.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
from pathlib import Path

from app.durable import durable_replace
from app.engine import paths

TOKEN_FILE = "server-token"
# A DNS name (labels of letters, digits, hyphens and underscores; a trailing dot allowed).
# The dots between labels are required, so a string splits into labels one way only: with
# each dot optional, a long run of letters that fails at its end was tried split every
# way (24 characters took a second, each more doubled it).
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_DNS_NAME = re.compile(rf"(?=.{{1,253}}\.?$){_LABEL}(?:\.{_LABEL})*\.?")


def token_path() -> Path:
    return paths.data_dir() / TOKEN_FILE


def read_token(path: Path | None = None) -> str | None:
    """The stored token, or None when there is none yet."""
    path = path or token_path()
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return text or None


def new_token(path: Path | None = None) -> str:
    """Make a fresh token and store it readable by this user only (0600)."""
    path = path or token_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    temp = path.with_name(f".{path.name}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    os.chmod(temp, 0o600)
    durable_replace(temp, path)  # a client given this token keeps it through a power cut
    return token


def stored_or_new_token(path: Path | None = None) -> str:
    """The stored token, made first if there is none (the window's server always has one)."""
    return read_token(path) or new_token(path)


def host_name(text: str) -> str:
    """A host name or address as the server compares them: lower case, no trailing dot, an
    IPv6 address without its brackets."""
    name = text.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name


def is_ip_address(name: str) -> bool:
    """Whether `name` (as `host_name` gives it) is an IPv4 or IPv6 address, not a DNS name."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_name_problem(text: str) -> str | None:
    """Why `text` cannot be a name the server answers to (None: it can): a bare name or
    address, no scheme, port, path or wildcard."""
    name = host_name(text)
    if not name:
        return "an allowed host name is empty"
    if is_ip_address(name):
        return None
    if not _DNS_NAME.fullmatch(name):
        return (
            f"{text.strip()[:80]!r} is not a host name (give a bare name or address such as "
            "easel.lan or 192.168.1.20, without http:// or a port)"
        )
    return None
