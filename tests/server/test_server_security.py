"""Nobody gets in who should not: loopback by default, a token for any other address."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from pathlib import Path

import httpx
import pytest

from app.server.security import (
    TokenNeeded,
    is_loopback,
    new_token,
    presented_token,
    read_token,
    token_for,
    token_matches,
)
from tests.server.serving import serve_command, serving

TOKEN = "a-test-token-that-is-long-enough"


def test_a_non_loopback_address_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    command, env = serve_command(tmp_path / "home", 7, "--host", "0.0.0.0", "--no-workers")
    env.pop("EASEL_SERVER_TOKEN", None)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "needs a token" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_with_a_token_every_request_without_it_is_refused(tmp_path: Path) -> None:
    args = ("--host", "0.0.0.0", "--token", TOKEN, "--no-workers")
    with (
        serving(tmp_path / "home", *args, host="127.0.0.1") as served,
        httpx.Client(base_url=served.url) as client,
    ):
        for path in ("/api/v1/queue", "/sdapi/v1/sd-models", "/docs", "/api/v1/jobs/1"):
            refused = client.get(path)
            assert refused.status_code == 401
            assert "needs a token" in refused.json()["error"]
        assert client.get("/api/v1/queue", headers={"Authorization": "Bearer wrong"}
                              ).status_code == 401  # fmt: skip
        posted = client.post("/api/v1/jobs", json={"prompt": "sneaky"})
        assert posted.status_code == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get("/api/v1/queue", headers=bearer).json()["counts"]["PENDING"] == 0
        # A1111 clients send it as HTTP Basic's password (webuiapi's set_auth).
        basic = base64.b64encode(f"user:{TOKEN}".encode()).decode()
        models = client.get("/sdapi/v1/sd-models", headers={"Authorization": f"Basic {basic}"})
        assert models.status_code == 200


def test_the_stored_token_is_private_and_read_back(easel_home: Path) -> None:
    token = new_token()
    path = easel_home / "server-token"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_token() == token and len(token) >= 32
    assert token_for("0.0.0.0", None) == token
    assert "settings" not in path.name


def test_which_addresses_need_a_token(easel_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EASEL_SERVER_TOKEN", raising=False)
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "10.0.0.2")] == [
        True, True, True, False, False,
    ]  # fmt: skip
    assert token_for("127.0.0.1", None) is None
    with pytest.raises(TokenNeeded, match="needs a token"):
        token_for("0.0.0.0", None)
    with pytest.raises(TokenNeeded, match="at least 16"):
        token_for("0.0.0.0", "short")


def test_tokens_are_read_from_every_header_clients_use() -> None:
    basic = base64.b64encode(b"me:secret-value").decode()
    assert presented_token(f"Bearer {TOKEN}", None) == TOKEN
    assert presented_token(f"Basic {basic}", None) == "secret-value"
    assert presented_token(None, TOKEN) == TOKEN
    assert presented_token("Basic !!!", None) is None
    assert token_matches(TOKEN, TOKEN) and not token_matches(TOKEN, TOKEN[:-1])
    assert not token_matches(TOKEN, None)


@pytest.mark.slow
def test_serve_takes_its_database_after_the_command(tmp_path: Path) -> None:
    database = tmp_path / "elsewhere.db"
    with (
        serving(tmp_path / "home", "--db", str(database), "--no-workers") as served,
        httpx.Client(base_url=served.url) as client,
    ):
        [job_id] = client.post("/api/v1/jobs", json={"prompt": "there"}).json()["ids"]
    from app.engine.jobs.queue import JobQueue
    from app.models.opening import open_database

    queue = JobQueue(open_database(str(database)))
    try:
        assert queue.get(job_id).prompt == "there"
    finally:
        queue.db.dispose()
