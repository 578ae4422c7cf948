"""The HTTP API from the window: off by default; with a port in the settings, the window
starts `python -m app serve` beside itself, shows its address and stops it on close."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.settings import DB_ENV, load_settings, save_settings
from app.ui.widgets.window import MainWindow
from tests.server.serving import free_port

pytestmark = pytest.mark.timeout(120)


def test_no_api_unless_the_settings_ask(window: MainWindow) -> None:
    assert load_settings().api_port == 0
    assert window.api_server is None


def test_the_window_serves_the_api_on_the_port_it_is_given(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    queue: JobQueue,
    db_location: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    save_settings(load_settings().with_changes(api_port=port))
    monkeypatch.setenv(DB_ENV, db_location)  # the child serves the window's own queue
    window = make_window()
    server = window.api_server
    assert server is not None
    address = f"http://127.0.0.1:{port}"
    qtbot.waitUntil(lambda: server.label.text() == f"API: {address}", timeout=60_000)
    answer = httpx.post(f"{address}/api/v1/jobs", json={"prompt": "from another program"},
                        headers={"X-Easel-Client": "test"}, timeout=30)  # fmt: skip
    assert answer.status_code == 201, answer.text
    [job_id] = answer.json()["ids"]
    assert queue.get(job_id).prompt == "from another program"
    assert queue.timeline(job_id)[0].source == "api:test"
    window.close()
    assert server.process.state().name == "NotRunning"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{address}/api/v1/queue", timeout=5)
