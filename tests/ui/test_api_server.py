"""The HTTP API from the window: off by default; with a port in the settings, the window
starts `python -m app serve` beside itself, shows its address and stops it on close. Its
server wants the token Settings shows, from A1111 clients too unless the user lets them in
without it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot

from app.engine.api_access import read_token, stored_or_new_token
from app.engine.jobs.queue import JobQueue
from app.engine.settings import DB_ENV, load_settings, save_settings
from app.ui.widgets.settings_dialog import SettingsDialog
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
    body = {"prompt": "from another program"}
    tokenless = httpx.post(f"{address}/api/v1/jobs", json=body, timeout=30)
    assert tokenless.status_code == 401  # even on 127.0.0.1: any program, any user
    assert httpx.get(f"{address}/sdapi/v1/sd-models", timeout=30).status_code == 401
    token = read_token()
    assert token is not None and len(token) >= 32
    headers = {"X-Easel-Client": "test", "Authorization": f"Bearer {token}"}
    answer = httpx.post(f"{address}/api/v1/jobs", json=body, headers=headers, timeout=30)
    assert answer.status_code == 201, answer.text
    [job_id] = answer.json()["ids"]
    assert queue.get(job_id).prompt == "from another program"
    assert queue.timeline(job_id)[0].source == "api:test"
    window.close()
    assert server.process.state().name == "NotRunning"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{address}/api/v1/queue", timeout=5)


def test_settings_show_the_token_and_keep_the_names_and_the_a1111_choice(
    qtbot: QtBot, easel_home: Path
) -> None:
    token = stored_or_new_token()
    dialog = SettingsDialog(load_settings(), save_settings)
    qtbot.addWidget(dialog)
    fields = dialog.api_access
    assert fields.token.edit.text() == token and fields.token.edit.isReadOnly()
    fields.token.copy.click()
    assert QGuiApplication.clipboard().text() == token
    fields.hosts.setText("easel.lan, 192.168.1.20")
    fields.a1111_open.setChecked(True)
    dialog.accept()
    saved = load_settings()
    assert saved.api_allowed_hosts == ("easel.lan", "192.168.1.20")
    assert saved.api_a1111_without_token
    assert "server-token" not in (easel_home / "settings.json").read_text()
    assert token not in (easel_home / "settings.json").read_text()
    again = SettingsDialog(saved, save_settings)
    qtbot.addWidget(again)
    again.api_access.hosts.setText("http://easel.lan:7860")
    again.accept()
    assert "is not a host name" in again.error.text() and load_settings() == saved


def test_a1111_clients_may_go_without_the_token_where_the_user_allows_it(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    db_location: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    save_settings(load_settings().with_changes(api_port=port, api_a1111_without_token=True))
    monkeypatch.setenv(DB_ENV, db_location)
    window = make_window()
    server = window.api_server
    assert server is not None
    address = f"http://127.0.0.1:{port}"
    qtbot.waitUntil(lambda: server.label.text() == f"API: {address}", timeout=60_000)
    assert httpx.get(f"{address}/sdapi/v1/sd-models", timeout=30).status_code == 200
    assert httpx.get(f"{address}/api/v1/queue", timeout=30).status_code == 401
    window.close()
