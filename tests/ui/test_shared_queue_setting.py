"""Settings > Shared queue (issue 14.1, 14.6): a PostgreSQL URL typed, tried and saved with
real keys and clicks, against the real test server; the password never reaches
settings.json, only libpq's password file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox
from pytestqt.qtbot import QtBot
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.engine.jobs.params import GenerationParams
from app.engine.settings import DB_ENV, load_settings, save_settings, settings_path
from app.engine.store.opening import open_queue
from app.engine.store.shared_queue import Found, probe_queue
from app.models.migrations import SCHEMA_VERSION
from app.models.pgpass import PASSFILE_ENV
from app.models.postgres import schema_version_at
from app.ui.widgets.settings_dialog import SettingsDialog
from tests import pg

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 15_000


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """(the URL of a fresh schema without its password, the password); a private passfile."""
    monkeypatch.setenv(PASSFILE_ENV, str(tmp_path / "pgpass"))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pg.fresh_schema() as location:
        yield pg.without_password(location)


def open_dialog(qtbot: QtBot) -> SettingsDialog:
    dialog = SettingsDialog(load_settings(), save_settings)
    qtbot.addWidget(dialog)
    with qtbot.waitExposed(dialog):
        dialog.show()
    return dialog


def type_into(qtbot: QtBot, dialog: SettingsDialog, url: str, password: str) -> None:
    section = dialog.shared_queue
    qtbot.keyClicks(section.url, url)
    qtbot.keyClicks(section.password, password)


def try_connection(qtbot: QtBot, dialog: SettingsDialog) -> str:
    """Click Test connection and wait for its answer; returns what the section says."""
    section = dialog.shared_queue
    qtbot.mouseClick(section.test, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: section.test.isEnabled(), timeout=TIMEOUT_MS)
    return section.answer.text()


def click_save(qtbot: QtBot, dialog: SettingsDialog) -> None:
    buttons = dialog.findChild(QDialogButtonBox)
    assert buttons is not None
    qtbot.mouseClick(
        buttons.button(QDialogButtonBox.StandardButton.Save), Qt.MouseButton.LeftButton
    )


def test_a_typed_password_is_tried_and_a_wrong_one_is_named(
    qtbot: QtBot, server: tuple[str, str]
) -> None:
    url, password = server
    dialog = open_dialog(qtbot)
    type_into(qtbot, dialog, url, "not-" + password)
    assert "password" in try_connection(qtbot, dialog)
    assert dialog.shared_queue.answer.objectName() == "error"
    dialog.shared_queue.password.clear()
    qtbot.keyClicks(dialog.shared_queue.password, password)
    said = try_connection(qtbot, dialog)
    assert said.startswith("Connected to ") and "holds no jobs yet" in said
    assert password not in said
    assert dialog.shared_queue.answer.objectName() == "hint"


def test_trying_a_connection_creates_and_changes_nothing(
    qtbot: QtBot, server: tuple[str, str]
) -> None:
    url, password = server
    dialog = open_dialog(qtbot)
    type_into(qtbot, dialog, url, password)
    try_connection(qtbot, dialog)
    assert schema_version_at(located(url, password)) is None  # no table was created
    queue = open_queue(located(url, password))
    queue.submit(GenerationParams("a red circle", steps=3))
    with queue.db.write() as conn:  # as an older Easel left it
        conn.execute(text("UPDATE schema_info SET version = :v"), {"v": SCHEMA_VERSION - 1})
    assert "tables are updated when Easel next starts" in try_connection(qtbot, dialog)
    assert schema_version_at(located(url, password)) == SCHEMA_VERSION - 1  # not migrated
    with queue.db.write() as conn:
        conn.execute(text("UPDATE schema_info SET version = :v"), {"v": SCHEMA_VERSION})
    assert ": 1 jobs, 1 waiting or running." in try_connection(qtbot, dialog)
    with queue.db.write() as conn:
        conn.execute(text("UPDATE schema_info SET version = :v"), {"v": SCHEMA_VERSION + 1})
    assert "newer Easel" in try_connection(qtbot, dialog)
    assert dialog.shared_queue.answer.objectName() == "error"
    queue.db.dispose()


def located(url: str, password: str) -> str:
    return make_url(url).set(password=password).render_as_string(hide_password=False)


def test_saving_keeps_the_url_in_settings_and_the_password_for_libpq(
    qtbot: QtBot, server: tuple[str, str], tmp_path: Path
) -> None:
    url, password = server
    dialog = open_dialog(qtbot)
    type_into(qtbot, dialog, url, password)
    click_save(qtbot, dialog)
    assert dialog.result() == SettingsDialog.DialogCode.Accepted
    assert load_settings().database_url == url
    assert password not in settings_path().read_text()
    assert password in (tmp_path / "pgpass").read_text()
    # Without a password anywhere but libpq's file, the saved URL opens.
    assert probe_queue(load_settings().database_url).found is Found.EMPTY
    again = open_dialog(qtbot)
    assert "saved on this computer" in again.shared_queue.password.placeholderText()


def test_a_url_that_is_not_postgresql_is_refused_and_nothing_is_saved(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSFILE_ENV, str(tmp_path / "pgpass"))
    dialog = open_dialog(qtbot)
    type_into(qtbot, dialog, "mysql://ana@studio/easel", "pw")
    click_save(qtbot, dialog)
    assert dialog.isVisible()
    assert "postgresql://" in dialog.error.text()
    assert load_settings().database_url == ""
    assert not (tmp_path / "pgpass").exists()


def test_an_unreachable_server_is_said_without_freezing_the_dialog(qtbot: QtBot) -> None:
    dialog = open_dialog(qtbot)
    type_into(qtbot, dialog, "postgresql://ana@127.0.0.1:9/easel", "pw")  # discard port
    said = try_connection(qtbot, dialog)
    assert "cannot be reached" in said
    assert dialog.shared_queue.answer.objectName() == "error"


def test_a_database_given_by_easel_db_is_named_above_the_setting(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV, "postgresql://ana:secret@studio/easel")
    dialog = open_dialog(qtbot)
    note = dialog.shared_queue.override
    assert note.isVisible() and "postgresql://ana:***@studio/easel" in note.text()
    assert "secret" not in note.text()
    monkeypatch.delenv(DB_ENV)
    assert not open_dialog(qtbot).shared_queue.override.isVisible()


def test_this_computers_jobs_are_copied_into_an_empty_shared_queue_once(
    qtbot: QtBot, server: tuple[str, str]
) -> None:
    url, password = server
    local = open_queue()  # this computer's queue, in the test's data folder
    first = local.submit(GenerationParams("a red circle", steps=3))
    local.submit(GenerationParams("a blue square", steps=3))
    local.cancel(first)
    local.db.dispose()
    dialog = open_dialog(qtbot)
    assert not dialog.shared_queue.copy.isEnabled()  # no URL yet
    type_into(qtbot, dialog, url, password)
    said = copy_and_wait(qtbot, dialog)
    assert said.startswith("Copied 2 jobs, 3 timeline rows and 0 images"), said
    shared = open_queue(located(url, password))
    assert [job.prompt for job in shared.jobs()] == ["a blue square", "a red circle"]
    assert [row.event for row in shared.timeline(first)] == ["SUBMIT", "CANCEL"]
    shared.db.dispose()
    assert "already holds jobs" in copy_and_wait(qtbot, dialog)  # never merged twice
    assert dialog.shared_queue.answer.objectName() == "error"
    local = open_queue()
    assert len(local.jobs()) == 2  # the jobs here stay as they were
    local.db.dispose()


def copy_and_wait(qtbot: QtBot, dialog: SettingsDialog) -> str:
    section = dialog.shared_queue
    qtbot.mouseClick(section.copy, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: section.test.isEnabled(), timeout=TIMEOUT_MS)
    return section.answer.text()
