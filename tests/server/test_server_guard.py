"""Browsers and foreign names are refused (issue 34 item 1), and the server stays answerable
while A1111 requests wait (item 5): the real server on loopback, spoken to as a hostile page's
browser, a rebinding name and the A1111 clients would speak to it."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
import webuiapi

from app.engine.api_access import host_name_problem
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.engine.settings import Settings
from app.server import a1111, waits
from app.server.run import ServeOptions, make_server
from app.server.security import (
    FOREIGN_HOST,
    FOREIGN_PAGE,
    NOT_A_PROGRAM,
    ServedNames,
    cross_site_refusal,
    read_token,
)
from app.server.state import Limits, ServerState, SlotKind
from tests.server.serving import Served, free_port, serve_command, serving

pytestmark = pytest.mark.timeout(180)

EVIL = "http://evil.example"
TOKEN = "a-test-token-that-is-long-enough"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("guarded")
    with serving(home, "--no-workers", "--allow-host", "easel.lan") as server:
        yield server


def submit(client: httpx.Client, prompt: str = "a cat") -> int:
    answer = client.post("/api/v1/jobs", json={"prompt": prompt})
    assert answer.status_code == 201, answer.text
    job_id: int = answer.json()["ids"][0]
    return job_id


def events(client: httpx.Client, job_id: int) -> list[str]:
    return [t["event"] for t in client.get(f"/api/v1/jobs/{job_id}").json()["timeline"]]


def test_a_foreign_host_is_421_and_the_names_served_answer(served: Served) -> None:
    port = served.url.rsplit(":", 1)[1]
    with served.client() as client:
        for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.2", "easel.lan.evil"):
            refused = client.get("/api/v1/jobs", headers={"Host": host})
            assert refused.status_code == 421, host
            assert refused.json() == {"error": FOREIGN_HOST}
        posted = client.post("/api/v1/jobs", json={"prompt": "rebound"},
                             headers={"Host": "attacker.example"})  # fmt: skip
        assert posted.status_code == 421
        assert client.get("/api/v1/jobs?q=rebound").json()["jobs"] == []
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}",
                     f"easel.lan:{port}", "Easel.LAN."):  # fmt: skip
            assert client.get("/api/v1/queue", headers={"Host": host}).status_code == 200, host


def test_a_bodyless_cross_site_cancel_is_403_and_the_job_untouched(served: Served) -> None:
    with served.client() as client:
        job_id = submit(client)
        cancel = f"/api/v1/jobs/{job_id}/cancel"
        refused = client.post(cancel, headers={"Origin": EVIL})
        assert refused.status_code == 403 and refused.json() == {"error": FOREIGN_PAGE}
        for origin in ("null", f"{served.url}.evil.example", "http://localhost:3000"):
            assert client.post(cancel, headers={"Origin": origin}).status_code == 403, origin
        fetched = client.post(cancel, headers={"Sec-Fetch-Site": "cross-site"})
        assert fetched.status_code == 403
        sibling = client.post(cancel, headers={"Sec-Fetch-Site": "same-site"})
        assert sibling.status_code == 403
        assert client.get(f"/api/v1/jobs/{job_id}").json()["status"] == "PENDING"
        assert events(client, job_id) == ["SUBMIT"]


def test_form_and_text_posts_without_a_program_header_are_403(served: Served) -> None:
    with served.client() as client:
        job_id = submit(client)
        text = client.post(f"/api/v1/jobs/{job_id}/pause", content=b"x",
                           headers={"Content-Type": "text/plain"})  # fmt: skip
        assert text.status_code == 403 and text.json() == {"error": NOT_A_PROGRAM}
        form_type = {"Content-Type": "application/x-www-form-urlencoded"}
        form = client.post("/sdapi/v1/interrupt", content=b"", headers=form_type)
        assert form.status_code == 403
        smuggled = client.post("/api/v1/jobs", content=b'{"prompt": "from a form"}',
                               headers={"Content-Type": "text/plain"})  # fmt: skip
        assert smuggled.status_code == 403
        assert client.get("/api/v1/jobs?q=form").json()["jobs"] == []
        assert events(client, job_id) == ["SUBMIT"]
        # What programs send: nothing at all (curl -X POST), a client header, or JSON.
        assert client.post(f"/api/v1/jobs/{job_id}/pause").json()["changed"]
        named_text = {"Content-Type": "text/plain", "X-Easel-Client": "krita"}
        named = client.post(f"/api/v1/jobs/{job_id}/resume", content=b"x", headers=named_text)
        assert named.status_code == 200
        # The server's own page (/docs trying a request out) is not another site.
        own = client.post(f"/api/v1/jobs/{job_id}/pause", content=b"",
                          headers={"Origin": served.url, "Sec-Fetch-Site": "same-origin",
                                   "Content-Type": "text/plain"})  # fmt: skip
        assert own.status_code == 200, own.text


def test_webuiapi_still_gets_in_bodyless_posts_included(served: Served) -> None:
    port = int(served.url.rsplit(":", 1)[1])
    api = webuiapi.WebUIApi(host="127.0.0.1", port=port)
    assert api.interrupt() is not None and api.skip() is not None  # 4xx would raise or warn
    api.set_options({"sd_model_checkpoint": api.get_options()["sd_model_checkpoint"]})
    assert api.get_progress()["state"]["job_count"] == 0


def test_an_allowed_host_and_a1111_without_the_token(tmp_path: Path) -> None:
    """`--allow-host` adds a name; with the token wanted on loopback (the window's server),
    the user may let A1111 clients in without it, and nothing else."""
    args = ("--no-workers", "--require-token", "--a1111-without-token", "--allow-host", "pc.lan")
    with serving(tmp_path / "home", *args) as server, server.client() as client:
        token = read_token(tmp_path / "home" / "server-token")
        assert token is not None
        assert client.get("/sdapi/v1/sd-models", headers={"Host": "pc.lan"}).status_code == 200
        assert client.get("/api/v1/queue").status_code == 401
        auth = {"Authorization": f"Bearer {token}"}
        assert client.get("/api/v1/queue", headers={**auth, "Host": "pc.lan:80"}).is_success
        assert client.get("/api/v1/queue", headers={**auth, "Host": "other.lan"}).status_code == 421
        # Without the token, still never from another site's page.
        refused = client.post("/sdapi/v1/interrupt", headers={"Origin": EVIL})
        assert refused.status_code == 403


def test_a1111_without_the_token_is_refused_off_loopback(tmp_path: Path) -> None:
    args = ("--host", "0.0.0.0", "--token", TOKEN, "--a1111-without-token", "--no-workers")
    command, env = serve_command(tmp_path / "home", free_port(), *args)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "127.0.0.1 only" in result.stderr and "Traceback" not in result.stderr


@contextmanager
def in_process(
    queue: JobQueue, token: str | None = None, cors: tuple[str, ...] = (),
    limits: Limits | None = None,
) -> Iterator[tuple[str, ServerState]]:  # fmt: skip
    options = ServeOptions(port=free_port(), token=token, cors_origins=cors,
                           limits=limits or Limits())  # fmt: skip
    server, state = make_server(queue, Settings(), options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{options.port}", state
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_refusals_carry_the_cors_headers_a_configured_page_needs(queue: JobQueue) -> None:
    app_origin = "https://app.example"
    with (
        in_process(queue, token=TOKEN, cors=(app_origin,)) as (url, _state),
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        page = {"Origin": app_origin}
        unauthorized = client.get("/api/v1/queue", headers=page)
        assert unauthorized.status_code == 401
        assert unauthorized.headers["access-control-allow-origin"] == app_origin
        assert "WWW-Authenticate" in unauthorized.headers["access-control-expose-headers"]
        foreign = client.get("/api/v1/queue", headers={**page, "Host": "attacker.example"})
        assert foreign.status_code == 421
        assert foreign.headers["access-control-allow-origin"] == app_origin
        too_big = client.post("/api/v1/jobs", content=b"x" * (17 * 2**20),
                              headers={**page, "Authorization": f"Bearer {TOKEN}",
                                       "Content-Type": "application/json"})  # fmt: skip
        assert too_big.status_code == 413
        assert too_big.headers["access-control-allow-origin"] == app_origin
        # The configured page, cross-site as browsers say, gets in with the token.
        posted = client.post("/api/v1/jobs", json={"prompt": "from the app"},
                             headers={**page, "Sec-Fetch-Site": "cross-site",
                                      "Authorization": f"Bearer {TOKEN}"})  # fmt: skip
        assert posted.status_code == 201, posted.text
        with_token = {"Origin": EVIL, "Authorization": f"Bearer {TOKEN}"}
        evil = client.post("/api/v1/jobs", json={"prompt": "x"}, headers=with_token)
        assert evil.status_code == 403
        assert "access-control-allow-origin" not in evil.headers


def test_waiting_a1111_requests_leave_progress_and_interrupt_answerable(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More waiting txt2img requests than there are slots in flight (64; no worker runs
    their jobs): status, progress, interrupt and cancel still answer, at once, and one
    reader reads all their jobs' statuses (not each request its own, every 50 ms)."""
    reads = [0]
    real_done_ids = waits.done_ids

    def counted(queue: JobQueue, job_ids: Iterable[int]) -> set[int]:
        reads[0] += 1
        return real_done_ids(queue, job_ids)

    monkeypatch.setattr(waits, "done_ids", counted)
    waiting_count, burst = 80, 16
    body = {"prompt": "a slow cat", "width": 64, "height": 64, "steps": 2, "sampler_name": "Euler"}
    with in_process(queue, limits=Limits(max_waiting=waiting_count)) as (url, state):
        answers: list[httpx.Response] = []

        def wait_for_one() -> None:
            answers.append(httpx.post(f"{url}/sdapi/v1/txt2img", json=body, timeout=120))

        threads = [threading.Thread(target=wait_for_one) for _ in range(waiting_count)]
        for sent, thread in enumerate(threads, start=1):
            thread.start()
            if sent % burst == 0:  # in bursts, each stored before the next comes
                deadline = time.monotonic() + 60
                while len(queue.jobs(limit=1000)) < sent:
                    assert not answers, answers[0].text  # none may be refused
                    assert time.monotonic() < deadline, f"{len(queue.jobs())} jobs stored"
                    time.sleep(0.05)
        assert state.slots.used[SlotKind.WAITING] == waiting_count
        before = reads[0]
        time.sleep(1.0)
        polls = 1.0 / a1111.WAIT_POLL_S
        assert reads[0] - before <= 2 * polls, f"{reads[0] - before} reads in 1 s"
        with httpx.Client(base_url=url, timeout=30) as client:
            started = time.monotonic()
            progress = client.get("/sdapi/v1/progress")
            elapsed = time.monotonic() - started
            assert progress.status_code == 200, progress.text
            assert progress.json()["state"]["job_count"] == waiting_count
            assert client.get("/api/v1/queue").status_code == 200
            [job] = queue.jobs(limit=1)
            assert client.get(f"/api/v1/jobs/{job.id}").status_code == 200
            assert client.post("/sdapi/v1/interrupt").status_code == 200  # none runs: none stops
            one_more = client.post("/sdapi/v1/txt2img", json=body)  # past max_waiting
            assert one_more.status_code == 503 and "waiting" in one_more.json()["error"]
            print(f"progress_with_{waiting_count}_waiting_ms: {elapsed * 1000:.0f}")
            for stored in queue.jobs(limit=1000):
                assert client.post(f"/api/v1/jobs/{stored.id}/cancel").status_code == 200
        for thread in threads:
            thread.join(timeout=60)
        assert len(answers) == waiting_count
        assert all(a.status_code == 200 and a.json()["images"] == [] for a in answers)
        assert len(queue.jobs(limit=1000)) == waiting_count  # the refused one stored nothing
        assert state.slots.used == dict.fromkeys(state.slots.used, 0)


def start_running(queue: JobQueue, job_id: int) -> None:
    assert queue.claim("worker-test", job_id=job_id) is not None


def stopped(queue: JobQueue, job_id: int) -> None:
    """As its worker does at its next step after a cancel."""
    queue.fire(job_id, JobEvent.STOPPED, source="worker")


class A1111Requests:
    """txt2img requests waiting in threads (no worker runs their jobs)."""

    BODY: ClassVar[dict[str, object]] = {
        "prompt": "a cat",
        "width": 64,
        "height": 64,
        "steps": 2,
        "sampler_name": "Euler",
    }

    def __init__(self, url: str, state: ServerState) -> None:
        self.url, self.state = url, state
        self.answers: list[httpx.Response] = []
        self.threads: list[threading.Thread] = []

    def send(self, batch_size: int) -> list[int]:
        """One request of `batch_size` images; its job ids once it waits for them."""
        before = set(self.state.a1111_batches)
        thread = threading.Thread(target=lambda: self.answers.append(httpx.post(
            f"{self.url}/sdapi/v1/txt2img", json={**self.BODY, "batch_size": batch_size},
            timeout=60)))  # fmt: skip
        thread.start()
        self.threads.append(thread)
        deadline = time.monotonic() + 30
        while len(set(self.state.a1111_batches) - before) < batch_size:
            assert time.monotonic() < deadline, "the request never waited"
            time.sleep(0.01)
        return sorted(set(self.state.a1111_batches) - before)

    def answered(self) -> list[int]:
        for thread in self.threads:
            thread.join(timeout=30)
        return [answer.status_code for answer in self.answers]


def test_interrupt_stops_the_generation_in_progress_and_its_batch_only(queue: JobQueue) -> None:
    with in_process(queue) as (url, state), httpx.Client(base_url=url, timeout=30) as client:
        requests = A1111Requests(url, state)
        a1, a2 = requests.send(batch_size=2)
        [b1] = requests.send(batch_size=1)
        [c1] = requests.send(batch_size=1)
        start_running(queue, b1)  # another request's job runs: skip stops it alone
        assert client.post("/sdapi/v1/skip").json()["cancelled"] == [b1]
        stopped(queue, b1)
        start_running(queue, a1)
        interrupted = client.post("/sdapi/v1/interrupt").json()
        assert interrupted["cancelled"] == [a1, a2] and set(interrupted["at_step"]) == {
            str(a1), str(a2)
        }  # fmt: skip
        stopped(queue, a1)
        statuses = {job.id: job.status for job in queue.jobs()}
        assert statuses == {a1: "CANCELLED", a2: "CANCELLED", b1: "CANCELLED", c1: "PENDING"}
        assert client.post("/sdapi/v1/interrupt").json()["cancelled"] == []  # none runs
        client.post(f"/api/v1/jobs/{c1}/cancel")
        assert requests.answered() == [200, 200, 200]


def test_interrupt_passes_over_a_job_that_finished_meanwhile(queue: JobQueue) -> None:
    """The running jobs are read, then cancelled one by one: one that finished in between
    is passed over (it used to end the request half-way with a 409)."""
    with in_process(queue) as (url, state), httpx.Client(base_url=url, timeout=30) as client:
        requests = A1111Requests(url, state)
        [first] = requests.send(batch_size=1)
        [second] = requests.send(batch_size=1)
        for job_id in (first, second):
            start_running(queue, job_id)
        read = state.records.running

        def read_then_one_finishes(api: str) -> list[int]:
            found = read(api)
            queue.fire(first, JobEvent.COMPLETE, source="worker")  # just finished
            return found

        state.records.running = read_then_one_finishes  # type: ignore[method-assign]
        answer = client.post("/sdapi/v1/interrupt")
        assert answer.status_code == 200, answer.text
        assert answer.json()["cancelled"] == [second]
        assert (queue.get(first).status, queue.get(second).status) == ("SUCCESS", "CANCELLING")
        stopped(queue, second)
        assert requests.answered() == [200, 200]


def test_which_names_a_server_answers_to() -> None:
    loopback = ServedNames.for_bind("127.0.0.1", ["Easel.LAN."])
    assert [loopback.serves(h) for h in ("localhost:7860", "[::1]", "easel.lan", "10.0.0.2")] == [
        True, True, True, False,
    ]  # fmt: skip
    wildcard = ServedNames.for_bind("0.0.0.0")
    here = socket.gethostname()
    hosts = ("10.0.0.2:7860", "[fe80::1]:80", here, "evil.example")
    assert [wildcard.serves(h) for h in hosts] == [True, True, True, False]
    one = ServedNames.for_bind("192.168.1.5")
    assert one.serves("192.168.1.5:7860") and not one.serves("localhost")
    assert not one.serves("192.168.1.6")
    assert host_name_problem("easel.lan") is None and host_name_problem("[::1]") is None
    for wrong in ("http://easel.lan", "easel.lan:7860", "*.lan", "a b", "", "a..lan"):
        assert host_name_problem(wrong) is not None, wrong
    assert host_name_problem("easel.lan.") is None and host_name_problem("my_box-2") is None


def test_a_long_name_that_fails_at_its_end_is_judged_at_once() -> None:
    """Settings and --allow-host check what a user typed: a name that fails late is judged in
    one pass, not by trying every split of it into labels (seconds at 24 characters)."""
    started = time.monotonic()
    for name in ("a" * 60 + "-", "a" * 250 + "-", "a." * 120 + "-"):
        assert host_name_problem(name) is not None
    assert time.monotonic() - started < 0.5


def test_which_changes_look_sent_by_another_sites_page() -> None:
    here = {"host": "127.0.0.1:7860"}
    json_type = {"content-type": "application/json; charset=utf-8"}
    cases = [
        ("GET", {"origin": EVIL}, (), None),  # reads: the Host check and CORS
        ("POST", {}, (), None),  # curl -X POST, webuiapi's interrupt
        ("POST", {"content-length": "0"}, (), None),
        ("POST", {"content-length": "3", **json_type}, (), None),
        ("POST", {"content-length": "3", "content-type": "text/plain"}, (), NOT_A_PROGRAM),
        ("POST", {"content-type": "multipart/form-data; b=x"}, (), NOT_A_PROGRAM),
        ("POST", {"transfer-encoding": "chunked"}, (), NOT_A_PROGRAM),
        ("POST", {"sec-fetch-mode": "no-cors"}, (), NOT_A_PROGRAM),
        ("POST", {"content-type": "text/plain", "x-easel-client": "krita"}, (), None),
        ("POST", {"origin": EVIL, **json_type}, (), FOREIGN_PAGE),
        ("DELETE", {"origin": "null"}, (), FOREIGN_PAGE),
        ("POST", {"sec-fetch-site": "same-site", **json_type}, (), FOREIGN_PAGE),
        ("POST", {"origin": "http://127.0.0.1:7860", "content-type": "text/plain"}, (), None),
        ("POST", {"origin": "http://127.0.0.1:7861", **json_type}, (), FOREIGN_PAGE),
        ("POST", {"origin": EVIL, "sec-fetch-site": "cross-site"}, (EVIL,), None),
        ("POST", {"origin": EVIL, "sec-fetch-site": "cross-site"}, ("*",), None),
    ]
    for method, headers, cors, expected in cases:
        assert cross_site_refusal(method, {**here, **headers}, cors) == expected, headers
