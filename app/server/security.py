"""Who may talk to the server: loopback only by default, a token for any other address.

The token lives in its own file (`<data>/server-token`, mode 0600), never in settings.json,
and is compared in constant time. A1111 clients that only know HTTP Basic (`--api-auth`)
send it as the password.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import os
import secrets
from pathlib import Path

from app.durable import durable_replace
from app.engine import paths
from app.errors import BadInput

TOKEN_FILE = "server-token"
TOKEN_ENV = "EASEL_SERVER_TOKEN"


class TokenNeeded(BadInput):
    """A non-loopback address without a token."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


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


def token_for(host: str, given: str | None) -> str | None:
    """The token the server requires on `host`: `given`, else $EASEL_SERVER_TOKEN, else the
    stored one; None (none required) on loopback without one. Refuses a non-loopback
    address without a token (`TokenNeeded`)."""
    token = given or os.environ.get(TOKEN_ENV) or None
    if token is None and not is_loopback(host):
        token = read_token()
    if token is None and not is_loopback(host):
        raise TokenNeeded(
            f"serving on {host} (not this computer only) needs a token: run "
            "`python -m app serve --new-token` once, or give --token"
        )
    if token is not None and len(token) < 16:
        raise TokenNeeded("the token must be at least 16 characters")
    return token


def presented_token(authorization: str | None, header_token: str | None) -> str | None:
    """The token in `Authorization: Bearer ...`, `Authorization: Basic` (as the password) or
    `X-Easel-Token`."""
    if header_token:
        return header_token
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2]
    return None


def token_matches(expected: str, presented: str | None) -> bool:
    if presented is None:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), presented.encode("utf-8"))
