"""Where a callback may go: checked at submit and again before each try.

A callback URL is a request the server makes on a client's behalf, so a client could aim it
at what only the server can reach: this machine's own services (the token-less loopback
API, `localhost:22`), the LAN, a cloud's metadata address. The host is resolved and every
address it gives must be public (not loopback, link-local, private, shared, multicast,
reserved or unspecified, IPv4 or IPv6, an IPv4 address mapped or tunnelled in IPv6
included) unless the user allows private networks. The sender then connects to the
address it checked (`callback_http`), so a name that resolves to a public address for the
check and a private one a moment later (DNS rebinding) never reaches the private one.

Refusals are one sentence that never repeats a password, and never says which address a
name resolved to: the client learns that it was refused, not what a probe found.
"""

from __future__ import annotations

import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as ResolveTimeout
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.engine.api_access import is_ip_address
from app.engine.jobs.params import InvalidParameters

MAX_URL_CHARS = 2000
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# Resolution in a small pool of its own, waited for with a timeout: getaddrinfo has none,
# and a slow name server must not hold a sender (or a submit) past the deadline. A lookup
# left behind ends by the resolver's own timeouts; four at most run at once.
_RESOLVER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="callback-resolve")


class CallbackRefused(InvalidParameters):
    """A callback URL that may not be called: malformed, with user-info, or not public.
    `outcome`: the few words a try's timeline note gives it."""

    def __init__(self, sentence: str, outcome: str = "refused: not a valid URL") -> None:
        super().__init__(sentence)
        self.outcome = outcome


@dataclass(frozen=True)
class CallbackTarget:
    url: str
    scheme: str  # "http" or "https"
    host: str  # as in the URL, lower case, IPv6 without brackets
    port: int
    netloc: str  # host and port as the URL writes them: the Host header


def parse_callback_url(url: str) -> CallbackTarget:
    """The URL's parts, or `CallbackRefused` saying what is wrong (never echoing it)."""
    if len(url) > MAX_URL_CHARS or not url.isascii() or any(c.isspace() for c in url):
        raise CallbackRefused(
            f"the callback URL must be at most {MAX_URL_CHARS} plain ASCII characters with "
            "no spaces (write an international name in its xn-- form)"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CallbackRefused("the callback URL is not an http:// or https:// URL")
    if "@" in parts.netloc:
        raise CallbackRefused(
            "the callback URL must not carry a user name or password: put a secret in its "
            "path or query, and check the X-Easel-Signature header",
            "refused: user name or password in the URL",
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise CallbackRefused("the callback URL's port is not a number up to 65535") from None
    if not parts.hostname or port == 0:
        raise CallbackRefused("the callback URL names no host or port")
    return CallbackTarget(url, parts.scheme, parts.hostname, port, parts.netloc)


def is_public(address: Address) -> bool:
    """Whether `address` is one anybody on the internet could be sent to: not this machine,
    its LAN, a link's neighbours, a multicast group or a range set aside."""
    # `is_global` is False for loopback, link-local, private, shared (100.64/10) and
    # documentation ranges, the unspecified address and IPv4's reserved 240/4; multicast,
    # IPv6's reserved ranges and its old site-local fec0::/10 count as global there.
    if not address.is_global or address.is_multicast or address.is_reserved:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_site_local:
            return False
        inner = _embedded_ipv4(address)
        return inner is None or is_public(inner)
    return True


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries and ends up at (mapped, 6to4, Teredo)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]  # the client the relay forwards to
    return None  # (NAT64's 64:ff9b::/96 lies in the reserved ::/8, refused as it is)


def resolve(host: str, port: int, timeout_s: float) -> list[Address]:
    """Every address `host` resolves to for a TCP connection, in the resolver's order."""

    def lookup() -> list[Address]:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        # A scope id ("fe80::1%eth0") is dropped: the address part is what is judged.
        return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found]

    try:
        addresses = _RESOLVER.submit(lookup).result(timeout=max(timeout_s, 0.01))
    except ResolveTimeout:
        raise CallbackRefused(f"the callback host {host} did not resolve in time",
                              "failed: the host did not resolve in time") from None  # fmt: skip
    except (OSError, UnicodeError, ValueError):
        raise CallbackRefused(f"the callback host {host} does not resolve",
                              "failed: the host does not resolve") from None  # fmt: skip
    if not addresses:
        raise CallbackRefused(f"the callback host {host} does not resolve",
                              "failed: the host does not resolve")  # fmt: skip
    return addresses


def checked_address(target: CallbackTarget, *, allow_private: bool, timeout_s: float) -> str:
    """The address to connect to for `target`: the first it resolves to, once every one is
    found public (or private networks are allowed); else `CallbackRefused`. All of them,
    not only the first: a client's next connection may take any."""
    addresses = resolve(target.host, target.port, timeout_s)
    if not allow_private and not all(is_public(address) for address in addresses):
        literal = is_ip_address(target.host)
        raise CallbackRefused(
            f"the callback host {target.host} "
            + ("is" if literal else "resolves to")
            + " a private address (loopback, link-local, private network, multicast or "
            "reserved): callbacks go to public addresses only, unless private networks are "
            "allowed (serve --allow-private-callbacks, or allow_private_callbacks in "
            "settings)",
            "refused: private address",
        )
    return str(addresses[0])


def check_callback_url(url: str, *, allow_private: bool, timeout_s: float) -> None:
    """At submit: the whole check, so a client hears at once what the sender would refuse."""
    checked_address(parse_callback_url(url), allow_private=allow_private, timeout_s=timeout_s)


def shown_url(url: str) -> str:
    """`url` without user-info, for a record stored before user-info was refused."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
