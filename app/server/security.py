"""Who may talk to the server: loopback only by default, a token for any other address,
and never a browser tricked by another site's page.

The token lives in its own file (`<data>/server-token`, mode 0600, app/engine/api_access.py),
never in settings.json, and is compared in constant time. A1111 clients that only know HTTP
Basic (`--api-auth`) send it as the password.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.engine.api_access import (  # noqa: F401 (where the CLI and tests have found them)
    TOKEN_FILE,
    host_name,
    is_ip_address,
    new_token,
    read_token,
    stored_or_new_token,
    token_path,
)
from app.errors import BadInput

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


def token_for(host: str, given: str | None, *, required: bool = False) -> str | None:
    """The token the server requires on `host`: `given`, else $EASEL_SERVER_TOKEN, else the
    stored one; None (none required) on loopback without one, unless `required` (the
    window's server: the stored token, made if there is none). Refuses a non-loopback
    address without a token (`TokenNeeded`)."""
    token = given or os.environ.get(TOKEN_ENV) or None
    if token is None and required:
        token = stored_or_new_token()
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


# --- Which requests a browser may have been tricked into sending -------------------------
# A page on another site can make the browser send simple requests here (forms, `fetch` in
# no-cors mode, with the user's network position) and, with DNS rebinding, read answers
# under a name of its own. The Host header stops the second, Origin, Sec-Fetch-Site and the
# content type the first.

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
# Headers a cross-site form or no-cors fetch cannot send (a browser asks first, and CORS,
# closed unless configured, says no): their presence shows a program, not a page.
PROGRAM_HEADERS = ("authorization", "x-easel-token", "x-easel-client")
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

FOREIGN_HOST = (
    "This server does not answer to the host name in the request; if the name is yours, "
    "add it with `serve --allow-host NAME` or in Settings."
)
FOREIGN_PAGE = "This server takes no changes from another site's page."
NOT_A_PROGRAM = (
    "A request that changes something must be sent as JSON (Content-Type: application/json) "
    "or carry an X-Easel-Client or Authorization header."
)


@dataclass(frozen=True)
class ServedNames:
    """The host names a server answers to: the address it is bound to (with `localhost`,
    127.0.0.1 and [::1] when that is loopback) and the names the user added. Bound to every
    address (0.0.0.0), it answers to any IP address and this machine's own names: DNS
    rebinding needs a name, a browser sends an address only to the page at that address."""

    names: frozenset[str]
    any_address: bool = False

    @classmethod
    def for_bind(cls, bound: str, allowed: Iterable[str] = ()) -> ServedNames:
        names = {host_name(bound), *(host_name(name) for name in allowed)}
        wildcard = host_name(bound) in WILDCARD_BINDS
        if wildcard or is_loopback(host_name(bound)):
            names |= LOOPBACK_NAMES
        if wildcard:
            names |= {host_name(socket.gethostname()), host_name(socket.getfqdn())}
        return cls(frozenset(names - {""}), any_address=wildcard)

    def serves(self, host_header: str | None) -> bool:
        if host_header is None:
            return True  # HTTP/1.0 without Host: no browser sends that
        name = name_in_host_header(host_header)
        if name in self.names:
            return True
        return self.any_address and is_ip_address(name)


def name_in_host_header(value: str) -> str:
    """The name in a Host header (`name:port`, `[::1]:port`, `name`), as `host_name` gives."""
    text = value.strip()
    if text.startswith("["):
        end = text.find("]")
        return host_name(text[: end + 1]) if end > 0 else ""
    return host_name(text.rpartition(":")[0] if ":" in text else text)


def cross_site_refusal(
    method: str, headers: Mapping[str, str], cors_origins: Iterable[str]
) -> str | None:
    """Why a request that changes state looks sent by another site's page (None: it does
    not). Reads are left to the Host check and CORS: a page cannot read their answers."""
    if method.upper() in SAFE_METHODS:
        return None
    origin = headers.get("origin")
    allowed = set(cors_origins)
    configured = origin is not None and (origin in allowed or "*" in allowed)  # `--cors '*'`
    ours = origin is not None and _same_origin(origin, headers.get("host"))
    if origin is not None and not (configured or ours):
        return FOREIGN_PAGE
    if headers.get("sec-fetch-site", "").lower() in ("cross-site", "same-site") and not configured:
        return FOREIGN_PAGE
    if configured or ours or _sent_by_a_program(headers):
        return None
    return NOT_A_PROGRAM


def _same_origin(origin: str, host_header: str | None) -> bool:
    """The page's origin is this server under the name the request came to (a name the Host
    check let in), e.g. /docs trying a request out."""
    scheme, sep, rest = origin.partition("://")
    return bool(sep) and scheme in ("http", "https") and host_header is not None and (
        rest.lower() == host_header.strip().lower()
    )  # fmt: skip


def _sent_by_a_program(headers: Mapping[str, str]) -> bool:
    """JSON, a header no cross-site form sends, or no body at all with no trace of a browser:
    every browser sends Origin with a POST from `fetch` and a content type with a form, so
    a body-less POST with neither (A1111 clients' interrupt, `curl -X POST`) is a program."""
    media_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type == "application/json":
        return True
    if any(headers.get(name) for name in PROGRAM_HEADERS):
        return True
    bodiless = headers.get("content-length", "0").strip() == "0" and (
        "transfer-encoding" not in headers
    )  # fmt: skip
    browser_marks = ("content-type", "origin", "sec-fetch-site", "sec-fetch-mode")
    return bodiless and not any(mark in headers for mark in browser_marks)
