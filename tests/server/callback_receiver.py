"""A callback receiver on loopback, as a client's web hook would be: it checks each POST's
`X-Easel-Signature`, and answers at once or trickles its answer a byte at a time (the slow
receiver that used to hold the sender for ever)."""

from __future__ import annotations

import hashlib
import hmac
import select
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field

ANSWER = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass
class Post:
    arrived: float  # time.monotonic()
    headers: dict[str, str]
    body: bytes
    signed: bool  # the signature checked out with the secret
    released: float | None = None  # when the sender hung up on a trickled answer


@dataclass
class Receiver:
    """`trickle`: how many of the first POSTs are answered a byte every `every_s` (for up to
    `for_s`, or until the sender hangs up); the others get 204 at once."""

    secret: str = ""
    trickle: int = 0
    every_s: float = 5.0
    for_s: float = 40.0
    posts: list[Post] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                receiver._handle(self.request)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout_s: float) -> list[Post]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.posts) >= count:
                    return list(self.posts)
            time.sleep(0.02)
        with self._lock:
            return list(self.posts)

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        pairs = (line.partition(":") for line in lines[1:])
        headers = {name.strip().lower(): value.strip() for name, _, value in pairs}
        while len(body) < int(headers.get("content-length", "0")):
            body += conn.recv(65536)
        expected = "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
        signed = hmac.compare_digest(expected, headers.get("x-easel-signature", ""))
        post = Post(time.monotonic(), {"request-line": lines[0], **headers}, body, signed)
        with self._lock:
            self.posts.append(post)
            slow = len(self.posts) <= self.trickle
        if not slow:
            conn.sendall(ANSWER)
            return
        post.released = _trickle(conn, self.every_s, time.monotonic() + self.for_s)


def _trickle(conn: socket.socket, every_s: float, until: float) -> float | None:
    """Sends ANSWER a byte every `every_s` until `until`; the time the other side hung up
    (its end of the connection read as closed), or None if it never did."""
    for byte in ANSWER * 100:
        if time.monotonic() >= until:
            return None
        try:
            conn.sendall(bytes([byte]))
        except OSError:
            return time.monotonic()
        next_at = min(time.monotonic() + every_s, until)
        while (left := next_at - time.monotonic()) > 0:
            readable, _, _ = select.select([conn], [], [], left)
            if readable:
                try:
                    if conn.recv(1024) == b"":
                        return time.monotonic()
                except OSError:
                    return time.monotonic()
    return None
