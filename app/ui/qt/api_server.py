"""The HTTP API while the window is open (Settings: "HTTP API port"; 0, off, by default).

The window does not serve it in its own process: it starts `python -m app serve
--no-workers` on 127.0.0.1 as a child process, so the window never loads the web stack and
a crash of the server cannot take the window down. The window's own workers run the jobs
that come in, as they run any other (the server reaches the same database: the child
inherits the data folder and database the window was started with). The status bar shows
the address once the server listens, or that it stopped.

Unlike `serve` on 127.0.0.1, it wants a token from every client (`--require-token`: any
program of any user of this computer, or a page that rebinds a name to 127.0.0.1, could
otherwise drive it); Settings shows it. A1111 clients that cannot send one may go without
where the user allows it (`api_a1111_without_token`).
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, QProcess
from PySide6.QtWidgets import QLabel, QMainWindow

from app.engine.api_access import stored_or_new_token
from app.engine.settings import Settings

LOOPBACK = "127.0.0.1"
STOP_WAIT_MS = 5000


class ApiServer(QObject):
    def __init__(
        self, window: QMainWindow, port: int, *, a1111_without_token: bool = False
    ) -> None:
        super().__init__(window)
        self.port = port
        self.a1111_without_token = a1111_without_token
        self.address = f"http://{LOOPBACK}:{port}"
        self.label = QLabel()
        self.label.setObjectName("api-address")
        window.statusBar().addPermanentWidget(self.label)
        self.process = QProcess(self)
        self.process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        self.process.readyReadStandardOutput.connect(self._read)
        self.process.finished.connect(self._finished)
        self._stopping = False

    def start(self) -> None:
        stored_or_new_token()  # made here, not by the child: Settings shows it meanwhile
        args = ["serve", "--no-workers", "--host", LOOPBACK, "--port", str(self.port),
                "--require-token"]  # fmt: skip
        if self.a1111_without_token:
            args.append("--a1111-without-token")
        if not getattr(sys, "frozen", False):  # a bundle's executable is the app itself
            args = ["-m", "app", *args]
        self.label.setText(self.tr("API: starting on port {port}").format(port=self.port))
        self.process.start(sys.executable, args)

    def stop(self) -> None:
        self._stopping = True
        if self.process.state() is QProcess.ProcessState.NotRunning:
            return
        self.process.terminate()  # SIGTERM: uvicorn finishes what it is answering
        if not self.process.waitForFinished(STOP_WAIT_MS):
            self.process.kill()
            self.process.waitForFinished(STOP_WAIT_MS)

    def _read(self) -> None:
        text = bytes(self.process.readAllStandardOutput().data()).decode(errors="replace")
        if "serving on" in text:
            self.label.setText(self.tr("API: {address}").format(address=self.address))
            self.label.setToolTip(
                self.tr("Other programs can queue jobs here with the token from Settings; "
                        "see /docs")
            )  # fmt: skip

    def _finished(self, code: int, _status: QProcess.ExitStatus) -> None:
        if not self._stopping:
            self.label.setText(
                self.tr("API stopped (exit {code}; see logs/server.log)").format(code=code)
            )


def start_api_server(window: QMainWindow, settings: Settings) -> ApiServer | None:
    """The API server the settings ask for, started; None when they ask for none."""
    if not settings.api_port:
        return None
    server = ApiServer(
        window, settings.api_port, a1111_without_token=settings.api_a1111_without_token
    )
    server.start()
    return server
