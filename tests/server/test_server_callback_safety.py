"""Callbacks that cannot be aimed inside (issue 34): private addresses refused at submit and
again at send, no user-info, the connection pinned to the address checked, one deadline
for a whole try so a slow receiver holds one sender for that long and no other job's
callback waits, one try at a time across servers, every body signed, and outcomes in the
timeline that say what happened without what a probe found."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.engine.jobs.api_jobs import EASEL_API, ApiJobs, callback_secret
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, NewJobs
from app.engine.settings import Settings
from app.server import callback_targets
from app.server.callback_targets import CallbackRefused, is_public, parse_callback_url
from app.server.callbacks import CallbackPolicy, CallbackSender
from app.server.signing import signature
from tests.server.callback_receiver import Receiver
from tests.server.serving import Served, serving, shown_callback_secret
from tests.server.test_server_api import running

pytestmark = pytest.mark.timeout(120)

PRIVATE_URLS = [
    "http://127.0.0.1:9/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/hook",
    "http://[::1]:8080/hook",
    "http://localhost:22/",
    "http://0.0.0.0:7860/api/v1/jobs/1/cancel",
    "http://[::ffff:127.0.0.1]/hook",
    "http://2130706433/hook",  # 127.0.0.1 written as one number
]


@pytest.mark.parametrize(
    ("address", "public"),
    [("127.0.0.1", False), ("169.254.169.254", False), ("10.0.0.1", False),
     ("172.16.5.4", False), ("192.168.1.1", False), ("100.64.0.1", False),
     ("0.0.0.0", False), ("224.0.0.251", False), ("255.255.255.255", False),
     ("240.0.0.1", False), ("::1", False), ("::", False), ("fe80::1", False),
     ("fc00::1", False), ("fec0::1", False), ("ff02::1", False),
     ("::ffff:10.0.0.1", False), ("2002:7f00:1::", False), ("64:ff9b::a00:1", False),
     ("8.8.8.8", True), ("2606:4700:4700::1111", True), ("2002:808:808::", True)],
)  # fmt: skip
def test_only_public_addresses_are_public(address: str, public: bool) -> None:
    assert is_public(ipaddress.ip_address(address)) is public


@pytest.mark.parametrize(
    ("url", "says"),
    [("http://user:hunter2@example.com/hook", "must not carry a user name or password"),
     ("http://:hunter2@example.com/hook", "must not carry a user name or password"),
     ("http://example.com:99999/", "port"), ("ftp://example.com/", "not an http"),
     ("http:///nohost", "not an http"), ("http://exa mple.com/", "no spaces")],
)  # fmt: skip
def test_malformed_urls_are_refused_in_a_sentence_that_does_not_echo_them(
    url: str, says: str
) -> None:
    with pytest.raises(CallbackRefused) as refused:
        parse_callback_url(url)
    assert says in str(refused.value) and "hunter2" not in str(refused.value)


def test_callbacks_to_private_addresses_and_user_info_are_refused_at_submit(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, "--no-workers") as served, served.client() as client:
        for url in PRIVATE_URLS:
            answer = client.post("/api/v1/jobs", json={"prompt": "a cat", "callback_url": url})
            assert answer.status_code == 422, url
            assert "a private address" in answer.json()["error"], url
        with_password = "https://artist:hunter2@example.com/hook"
        answer = client.post(
            "/api/v1/jobs", json={"prompt": "a cat", "callback_url": with_password}
        )
        assert answer.status_code == 422 and "hunter2" not in answer.text
        assert "must not carry a user name or password" in answer.json()["error"]
        assert client.get("/api/v1/jobs").json()["jobs"] == []  # nothing stored
    logs = [path.read_text(errors="replace") for path in tmp_path.rglob("*.log")]
    assert not any("hunter2" in text for text in logs)


def fake_dns(monkeypatch: pytest.MonkeyPatch, names: dict[str, list[str]]) -> list[str]:
    """`getaddrinfo` answering `names` as given (the rest as the machine does); returns the
    names looked up, in order."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in names:
            return real(host, port, *args, **kwargs)
        asked.append(host)
        answers = names[host]
        if not answers:
            raise socket.gaierror(socket.EAI_NONAME, "not known")
        address = answers.pop(0) if len(answers) > 1 else answers[0]
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        where = (address, port, 0, 0) if family == socket.AF_INET6 else (address, port)
        return [(family, socket.SOCK_STREAM, 6, "", where)]

    monkeypatch.setattr(callback_targets.socket, "getaddrinfo", getaddrinfo)
    return asked


def test_a_public_name_that_dns_resolves_to_a_private_address_is_refused_at_submit(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_dns(monkeypatch, {"hooks.example.com": ["10.0.0.7"]})
    with running(queue, settings=Settings()) as api:
        url = "https://hooks.example.com/done"
        answer = api.client.post("/api/v1/jobs", json={"prompt": "a cat", "callback_url": url})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert "hooks.example.com resolves to a private address" in error
    assert "10.0.0.7" not in error  # what the name resolved to stays unsaid
    assert sum(queue.count_by_status().values()) == 0


def settled_job(queue: JobQueue, url: str) -> int:
    """A cancelled job whose callback is due, stored as a submit stores it (its URL checked
    then, not now: what a name resolves to can change after the submit)."""
    hook = ApiJobs(queue.db).hook(EASEL_API, "test", url)
    stored = queue.submit_keyed(NewJobs([GenerationParams("a cat")]), with_jobs=hook)
    [job_id] = stored.jobs
    queue.cancel(job_id, source="test")
    return job_id


def notes(queue: JobQueue, job_id: int) -> list[str]:
    _job, timeline, _record = ApiJobs(queue.db).job_view(job_id)
    return [row.message for row in timeline if not hasattr(row, "event")]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


def test_a_name_that_turns_private_after_the_submit_is_refused_at_send(
    queue: JobQueue, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: public when the client submitted, this machine when the sender looks."""
    fake_dns(monkeypatch, {"rebind.example": ["127.0.0.1"]})
    url = f"http://rebind.example:{receiver.port}/hook"
    job_id = settled_job(queue, url)
    sender = CallbackSender(queue, ApiJobs(queue.db), policy=CallbackPolicy(allow_private=False))
    assert sender.send_due() == 0
    assert receiver.posts == []
    assert notes(queue, job_id) == [
        f"callback 1 of 8 to {url}: refused: private address; tried again in 1 s"
    ]


def test_the_sender_connects_to_the_address_it_checked_with_the_name_in_host(
    queue: JobQueue, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name is looked up once, for the check; a second lookup (here: one that fails)
    would be the one DNS rebinding answers."""
    asked = fake_dns(monkeypatch, {"pinned.example": ["127.0.0.1", "no such address"]})
    monkeypatch.setattr(callback_targets.socket, "getaddrinfo", _fail_after_first(asked))
    url = f"http://pinned.example:{receiver.port}/hook?x=1"
    job_id = settled_job(queue, url)
    sender = CallbackSender(queue, ApiJobs(queue.db), policy=CallbackPolicy(allow_private=True))
    assert sender.send_due() == 1
    [post] = receiver.posts
    assert post.headers["host"] == f"pinned.example:{receiver.port}"
    assert post.headers["request-line"] == "POST /hook?x=1 HTTP/1.1"
    assert asked == ["pinned.example"]
    assert json.loads(post.body)["job_id"] == job_id


def _fail_after_first(asked: list[str]) -> Any:
    lookup = callback_targets.socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "pinned.example" and asked:
            asked.append(host)
            raise socket.gaierror(socket.EAI_NONAME, "not known")
        return lookup(host, port, *args, **kwargs)

    return getaddrinfo


@contextlib.contextmanager
def raw_answer(answer: bytes) -> Iterator[str]:
    """A loopback server answering every connection with `answer`; its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                conn, _ = listener.accept()
                with conn:
                    conn.recv(65536)
                    conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join()
        listener.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("answer", "said"),
    [(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 17\r\n\r\nTraceback: secret",
      "failed: receiver answered HTTP 500"),
     (b"HTTP/1.1 302 Found\r\nLocation: http://10.0.0.1/\r\nContent-Length: 0\r\n\r\n",
      "failed: receiver answered HTTP 302 (redirects are not followed)"),
     (b"SSH-2.0-OpenSSH_9.6\r\n", "failed: the receiver's answer was not HTTP"),
     (None, "failed: could not connect")],
)  # fmt: skip
def test_outcomes_are_fixed_words_never_what_the_probe_found(
    queue: JobQueue, answer: bytes | None, said: str
) -> None:
    sender = CallbackSender(queue, ApiJobs(queue.db), policy=CallbackPolicy(allow_private=True))
    with contextlib.ExitStack() as stack:
        if answer is None:
            url = f"http://127.0.0.1:{closed_port()}/hook"
        else:
            url = stack.enter_context(raw_answer(answer))
        job_id = settled_job(queue, url)
        assert sender.send_due() == 0
    [note] = notes(queue, job_id)
    assert note == f"callback 1 of 8 to {url}: {said}; tried again in 1 s"
    record = ApiJobs(queue.db).get(job_id)
    assert record is not None and record.callback_result == f"attempt 1 {said}; next in 1 s"


def test_the_queue_signs_with_one_secret_kept_out_of_the_settings(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(json.dumps({"callback_deadline_s": 5}))
    secret = shown_callback_secret(tmp_path)
    assert len(secret) == 64 and int(secret, 16) >= 0
    assert shown_callback_secret(tmp_path) == secret  # made once
    assert secret not in (tmp_path / "settings.json").read_text()
    body = b'{"job_id":1}'
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert signature(secret, body) == expected  # what the README's receiver computes


def submit_with_callback(client: httpx.Client, url: str) -> int:
    body = {"prompt": "call me back", "callback_url": url}
    answer = client.post("/api/v1/jobs", json=body)
    assert answer.status_code == 201 or answer.status_code == 200, answer.text
    [job_id] = answer.json()["ids"]
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", json={}).status_code == 200
    return int(job_id)


def wait_for_callback(client: httpx.Client, job_id: int, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job: dict[str, Any] = client.get(f"/api/v1/jobs/{job_id}").json()
        if job["callback"]["done_at"] is not None or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def with_deadline(home: Path, seconds: float) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"callback_deadline_s": seconds}))
    return home


def test_a_slow_receiver_costs_at_most_the_deadline_and_other_callbacks_go_on(
    tmp_path: Path,
) -> None:
    """A receiver that sends a byte every 5 s: every read gets something, so only a
    deadline on the whole try ends it; meanwhile another job's callback arrives."""
    home = with_deadline(tmp_path / "home", 7)
    secret = shown_callback_secret(home)
    slow = Receiver(secret=secret, trickle=1, every_s=5.0, for_s=40.0)
    fast = Receiver(secret=secret)
    try:
        with serving(home, "--no-workers", "--allow-private-callbacks") as served, \
                served.client() as client:  # fmt: skip
            slow_job = submit_with_callback(client, slow.url)
            [held] = slow.wait_for(1, timeout_s=15)
            fast_job = submit_with_callback(client, fast.url)
            [other] = fast.wait_for(1, timeout_s=5)
            assert other.arrived - held.arrived < 5  # not after the slow one let go
            job = wait_for_callback(client, slow_job, timeout_s=30)
            fast_done = wait_for_callback(client, fast_job, timeout_s=5)
    finally:
        slow.close()
        fast.close()
    assert held.released is not None and held.released - held.arrived <= 7 + 1.0
    assert held.released > other.arrived
    assert all(post.signed for post in slow.posts + fast.posts)
    assert [json.loads(post.body)["job_id"] for post in slow.posts] == [slow_job] * 2
    assert [post.headers["x-easel-attempt"] for post in slow.posts] == ["1", "2"]
    tries = [row["message"] for row in job["timeline"] if row["kind"] == "note"]
    assert tries == [
        f"callback 1 of 8 to {slow.url}: failed: no answer within the 7 s deadline; "
        "tried again in 1 s",
        f"callback 2 of 8 to {slow.url}: delivered (HTTP 204), status CANCELLED",
    ]
    assert fast_done["callback"]["result"] == "delivered (HTTP 204) with status CANCELLED"


def test_two_servers_on_one_queue_never_send_one_try_twice_to_a_slow_receiver(
    tmp_path: Path,
) -> None:
    """A receiver slower than the lease used to be (25 s) but sending a byte every 2 s:
    the try ends at the deadline, well inside its lease, so the other server never takes
    it while it runs; the next try comes after, and is delivered once."""
    home = with_deadline(tmp_path / "home", 3)
    secret = shown_callback_secret(home)
    receiver = Receiver(secret=secret, trickle=1, every_s=2.0, for_s=40.0)
    args = ("--no-workers", "--allow-private-callbacks")
    try:
        with serving(home, *args) as one, serving(home, *args) as two, one.client() as client:
            job_id = submit_with_callback(client, receiver.url)
            job = wait_for_callback(client, job_id, timeout_s=60)
            time.sleep(1.0)  # passes of both servers after the delivery: nothing more
            posts = list(receiver.posts)
            _stopped(one, two)
    finally:
        receiver.close()
    assert [post.headers["x-easel-attempt"] for post in posts] == ["1", "2"]
    first, second = posts
    assert first.released is not None and first.released <= second.arrived
    assert all(post.signed for post in posts)
    assert job["callback"]["result"] == "delivered (HTTP 204) with status CANCELLED"
    delivered = [row for row in job["timeline"] if "delivered" in row.get("message", "")]
    assert len(delivered) == 1


def _stopped(*servers: Served) -> None:
    """Both servers still up at the end (neither crashed on the other's claims)."""
    for served in servers:
        assert served.process.poll() is None


def test_a_server_made_secret_is_the_one_the_queue_keeps(queue: JobQueue) -> None:
    secret, made = callback_secret(queue.db)
    assert made and callback_secret(queue.db) == (secret, False)


def test_the_window_server_settings_default_to_public_callbacks_only() -> None:
    assert Settings().allow_private_callbacks is False
    assert Settings().callback_deadline_s == 10.0
    with pytest.raises(ValueError, match="callback deadline"):
        Settings(callback_deadline_s=0).validated()


def read_request(conn: socket.socket) -> bytes:
    """One whole HTTP request: its head, then as many body bytes as Content-Length says."""
    data = b""
    while b"\r\n\r\n" not in data:
        if not (chunk := conn.recv(65536)):
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
         if line.lower().startswith(b"content-length:")),
        0,
    )  # fmt: skip
    while len(body) < length and (chunk := conn.recv(65536)):
        body += chunk
    return head + b"\r\n\r\n" + body


@contextlib.contextmanager
def tls_receiver(folder: Path, name: str) -> Iterator[tuple[int, list[str], Path]]:
    """A loopback HTTPS receiver with a certificate for `name` only (made by `openssl`):
    its port, the SNI names its clients sent, and the certificate to trust."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
         "-addext", f"subjectAltName=DNS:{name}"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    sni: list[str] = []
    context.sni_callback = lambda _sock, server_name, _ctx: sni.append(str(server_name))
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with contextlib.suppress(OSError), context.wrap_socket(conn, server_side=True) as tls:
                read_request(tls)  # all of it: closing on an unread body resets the answer
                tls.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], sni, cert
    finally:
        stop.set()
        thread.join()
        listener.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_https_to_the_pinned_address_checks_the_certificate_of_the_name(
    queue: JobQueue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pinned to the checked address, TLS still speaks to the name: SNI and the certificate
    check are for it, so a certificate for another name fails the try."""
    fake_dns(monkeypatch, {"hooks.example": ["127.0.0.1"], "elsewhere.example": ["127.0.0.1"]})
    sender = CallbackSender(queue, ApiJobs(queue.db), policy=CallbackPolicy(allow_private=True))
    with tls_receiver(tmp_path, "hooks.example") as (port, sni, cert):
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trust the receiver's certificate
        good = settled_job(queue, f"https://hooks.example:{port}/hook")
        assert sender.send_due() == 1
        wrong = settled_job(queue, f"https://elsewhere.example:{port}/hook")
        assert sender.send_due() == 0
    assert sni[0] == "hooks.example"
    assert notes(queue, good)[0].endswith(": delivered (HTTP 204), status CANCELLED")
    assert notes(queue, wrong)[0].endswith(": failed: could not connect; tried again in 1 s")
