"""Settings > Shared queue: the PostgreSQL database several machines take jobs from.

The URL is saved in the settings; the password never is. Typed here, it goes to libpq's
own password file, where the window, headless workers and psql all find it. "Test
connection" tries what is typed (password included, without saving anything) on a thread
of its own, so a server that does not answer never freezes the dialog; so does "Copy this
computer's jobs there", which copies the local queue into an empty shared one (`db copy`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from PySide6.QtWidgets import (
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

from app.engine.settings import database_override
from app.engine.store.shared_queue import (
    Copied,
    Found,
    QueueProbe,
    copy_local_queue,
    password_saved,
    probe_queue,
)
from app.ui.qt.dbthread import Runner, ThreadRunner

T = TypeVar("T")
Probe = Callable[[str, str], QueueProbe]  # (url, password) -> what is there, or raises
Copy = Callable[[str, str], Copied]  # (url, password) -> what was copied, or raises
PasswordSaved = Callable[[str], bool]


class SharedQueueSection(QGroupBox):
    def __init__(
        self,
        url: str,
        parent: QWidget | None = None,
        *,
        probe: Probe = probe_queue,
        copy: Copy = copy_local_queue,
        saved: PasswordSaved = password_saved,
        runner: Runner | None = None,
    ) -> None:
        """`runner`: where requests run (default: a thread of this section's own)."""
        super().__init__(parent)
        self.setTitle(self.tr("Shared queue"))
        self._probe, self._copy, self._saved = probe, copy, saved
        self._runner = runner
        self._own_thread: ThreadRunner | None = None
        self._asked = 0  # answers to older requests are dropped: only the latest one shows
        self.url = QLineEdit(url)
        self.url.setPlaceholderText(self.tr("none: jobs stay on this computer"))
        self.url.setToolTip(
            self.tr("A PostgreSQL database that several computers take jobs from, e.g. "
                    "postgresql://easel@studio-server/easel?sslmode=require")
        )  # fmt: skip
        self.password = QLineEdit()
        self.password.setEchoMode(QLineEdit.EchoMode.Password)
        self.test = QPushButton(self.tr("Test connection"))
        self.test.clicked.connect(self.try_connection)
        self.copy = QPushButton(self.tr("Copy this computer's jobs there"))
        self.copy.setToolTip(
            self.tr("Into an empty database only: every job with its timeline, images and "
                    "paused progress. The jobs here stay as they are.")
        )  # fmt: skip
        self.copy.clicked.connect(self.copy_jobs)
        self.answer = QLabel()  # what the last test or copy found, or why it failed
        self.answer.setWordWrap(True)
        self.override = QLabel()
        self.override.setObjectName("hint")
        self.override.setWordWrap(True)
        if (chosen := database_override()) is not None:
            self.override.setText(
                self.tr("Easel now runs on {database}, given by --db or EASEL_DB; this "
                        "setting applies when neither is given.").format(database=chosen)
            )  # fmt: skip
        self.override.setVisible(chosen is not None)
        self.url.textChanged.connect(self._url_changed)
        self._url_changed()
        self._lay_out()

    def _lay_out(self) -> None:
        address = QHBoxLayout()
        address.addWidget(self.url, 1)
        address.addWidget(self.test)
        form = QFormLayout(self)
        form.addRow(self.override)
        form.addRow(self.tr("Database"), address)
        form.addRow(self.tr("Password"), self.password)
        copying = QHBoxLayout()
        copying.addWidget(self.copy)
        copying.addStretch(1)
        form.addRow("", copying)
        form.addRow("", self.answer)

    def chosen_url(self) -> str:
        return self.url.text().strip()

    def typed_password(self) -> str:
        return self.password.text()

    def try_connection(self) -> None:
        if not self.chosen_url():
            self._show(self.tr("Jobs stay on this computer: nothing to test."), error=False)
            return
        self._ask(self._probe, self.tr("Connecting…"), self._found_words)

    def copy_jobs(self) -> None:
        self._ask(self._copy, self.tr("Copying this computer's jobs…"), self._copied_words)

    def close_thread(self) -> None:
        """Let go of a request still waiting on a server (the dialog is closing)."""
        if self._own_thread is not None:
            self._own_thread.close(timeout=0)

    def _ask(self, request: Callable[[str, str], T], doing: str, words: Callable[[T], str]) -> None:
        """`request(url, password)` on the thread; its answer in `words`, or its error."""
        self._asked += 1
        asked = self._asked
        url, password = self.chosen_url(), self.typed_password()
        self._busy(True)
        self._show(doing, error=False)

        def answered(text: str, error: bool) -> None:
            if asked == self._asked:
                self._busy(False)
                self._show(text, error=error)

        self._thread().run(
            lambda: request(url, password),
            lambda result: answered(words(result), False),
            lambda message: answered(message, True),
        )

    def _busy(self, busy: bool) -> None:
        self.test.setEnabled(not busy)
        self.copy.setEnabled(not busy and bool(self.chosen_url()))

    def _found_words(self, found: QueueProbe) -> str:
        if found.found is Found.EMPTY:
            text = self.tr("Connected to {where}. It holds no jobs yet: Easel sets it up when "
                           "it next starts.")  # fmt: skip
        elif found.found is Found.OLDER:
            text = self.tr("Connected to {where}. Its jobs come from an older Easel: their "
                           "tables are updated when Easel next starts.")  # fmt: skip
        else:
            text = self.tr("Connected to {where}: {jobs} jobs, {waiting} waiting or running.")
        return text.format(where=found.where, jobs=found.jobs, waiting=found.waiting)

    def _copied_words(self, copied: Copied) -> str:
        return self.tr(
            "Copied {jobs} jobs, {rows} timeline rows and {files} images and saved progress "
            "to {where}. Save, then restart Easel to work on it."
        ).format(jobs=copied.jobs, rows=copied.history_rows, files=copied.files,
                 where=copied.where)  # fmt: skip

    def _url_changed(self) -> None:
        url = self.chosen_url()
        self.password.setEnabled(bool(url))
        if not url:
            hint = self.tr("not needed")
        elif self._saved(url):
            hint = self.tr("saved on this computer (leave empty to keep it)")
        else:
            hint = self.tr("none saved; type it to keep it in PostgreSQL's password file")
        self.password.setPlaceholderText(hint)
        self.copy.setEnabled(bool(url) and self.test.isEnabled())
        self.answer.clear()

    def _show(self, text: str, *, error: bool) -> None:
        self.answer.setObjectName("error" if error else "hint")
        self.answer.style().unpolish(self.answer)  # the theme styles by object name
        self.answer.style().polish(self.answer)
        self.answer.setText(text)

    def _thread(self) -> Runner:
        if self._runner is None:
            self._own_thread = self._runner = ThreadRunner("easel-db-test")
        return self._runner
