"""One callback POST: to the address that was checked, within one deadline for all of it.

Two things httpx's client does not give: connecting to an address chosen beforehand, and a
limit on the whole request (its timeouts bound each read, so a receiver that sends a byte
every few seconds holds it for ever). So the request goes through httpcore (the transport
under httpx: its HTTP/1.1 parser, TLS and certificate checks) with a network backend of
our own whose every operation gets the time left until one deadline:

- `connect_tcp` ignores the name and connects to the address `callback_targets` checked.
  The URL still names the host, so the Host header, TLS's SNI and the certificate check
  are all for that name, as a browser's would be; only the TCP connection is pinned. No
  second lookup, so no DNS rebinding between the check and the send; no proxy from the
  environment either (httpx would honour HTTP_PROXY: the proxy would choose the address).
- Each read, write and the TLS handshake are given the time left (CPython bounds one
  socket or TLS call by its timeout in all), and none starts once it is spent. The
  answer's status line and headers are all that is read: the body is never waited for.

Redirects are not followed (httpcore never does): a 3xx is a failed try like any non-2xx.
"""

from __future__ import annotations

import ssl
import time
import typing
from collections.abc import Iterable, Mapping

import httpcore
import httpx

from app.server.callback_targets import CallbackTarget


class CallbackFailed(Exception):
    """A try that got no usable answer; `reason` is safe to show (no exception text)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DeadlinePassed(CallbackFailed):
    """The try's time ran out before the answer's status came."""

    def __init__(self) -> None:
        super().__init__("no answer within the deadline")


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self, error: type[Exception]) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise error("the deadline passed")
        return left


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self.inner = inner
        self.deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, self.deadline.left(httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, self.deadline.left(httpcore.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:  # fmt: skip
        left = self.deadline.left(httpcore.ConnectTimeout)
        return _DeadlineStream(self.inner.start_tls(ssl_context, server_hostname, left),
                               self.deadline)  # fmt: skip

    def get_extra_info(self, info: str) -> typing.Any:
        return self.inner.get_extra_info(info)


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects to `address` whatever name the request gives (it gives the checked one)."""

    def __init__(self, host: str, address: str, deadline: _Deadline) -> None:
        self.host = host
        self.address = address
        self.deadline = deadline
        self.inner = httpcore.SyncBackend()

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:  # fmt: skip
        if host.strip("[]").lower() != self.host:  # never a host that was not checked
            raise httpcore.ConnectError("not the checked host")
        left = self.deadline.left(httpcore.ConnectTimeout)
        stream = self.inner.connect_tcp(self.address, port, left, local_address, socket_options)
        return _DeadlineStream(stream, self.deadline)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:  # fmt: skip
        raise httpcore.ConnectError("callbacks use TCP only")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def post(
    target: CallbackTarget, address: str, body: bytes, headers: Mapping[str, str],
    deadline_s: float,
) -> int:  # fmt: skip
    """POST `body` to `target` over a connection to `address`; the answer's HTTP status, or
    `CallbackFailed` when there was none within `deadline_s` (everything included)."""
    deadline = _Deadline(deadline_s)
    backend = _PinnedBackend(target.host, address, deadline)
    sent = {"Host": target.netloc, "Content-Type": "application/json", "Connection": "close",
            **headers}  # fmt: skip
    try:
        with (
            httpcore.ConnectionPool(
                ssl_context=httpx.create_ssl_context(), network_backend=backend, retries=0
            ) as pool,
            pool.stream("POST", target.url, headers=list(sent.items()), content=body) as answer,
        ):
            return int(answer.status)
    except httpcore.TimeoutException:
        raise DeadlinePassed from None
    except httpcore.ConnectError:
        raise CallbackFailed("could not connect") from None
    except (httpcore.NetworkError, httpcore.ProtocolError):
        raise CallbackFailed("the receiver's answer was not HTTP") from None
    except httpcore.UnsupportedProtocol:
        raise CallbackFailed("the URL's scheme is not http or https") from None
