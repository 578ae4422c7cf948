"""Running the server: uvicorn on a thread, the workers supervised as `python -m app worker`
supervises its own (`run_headless`, on the main thread, where its signal handlers live)."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import uvicorn

from app.engine.jobs.queue import JobQueue
from app.engine.settings import Settings
from app.engine.workers.headless import run_headless
from app.engine.workers.messages import WorkerMessage
from app.engine.workers.worker import WorkerConfig
from app.server.app import create_app
from app.server.callbacks import CallbackPolicy, CallbackSender
from app.server.security import ServedNames, TokenNeeded, is_loopback
from app.server.state import Limits, ServerState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 7860
    token: str | None = None
    cors_origins: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    allowed_hosts: tuple[str, ...] = ()  # names it answers to beyond its address's own
    a1111_without_token: bool = False  # /sdapi without the token (loopback only)


class ListeningServer(uvicorn.Server):
    """uvicorn's server, telling `on_listening` once its socket accepts connections:
    "serving on ..." printed before that (as before `run` binds) sent the window's first
    request, and a script's, to a port nobody listened on yet."""

    on_listening: Callable[[], object] = staticmethod(lambda: None)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.on_listening()


def make_server(queue: JobQueue, settings: Settings, options: ServeOptions,
                log_file: str = "the log") -> tuple[ListeningServer, ServerState]:  # fmt: skip
    if options.a1111_without_token and not is_loopback(options.host):
        raise TokenNeeded("A1111 clients may go without the token on 127.0.0.1 only")
    state = ServerState(
        queue, settings, token=options.token, limits=options.limits,
        cors_origins=options.cors_origins, log_file=log_file,
        served=ServedNames.for_bind(options.host, options.allowed_hosts),
        a1111_without_token=options.a1111_without_token,
    )  # fmt: skip
    config = uvicorn.Config(
        create_app(state), host=options.host, port=options.port, log_level="warning",
        access_log=False, timeout_graceful_shutdown=2, lifespan="on",
    )  # fmt: skip
    return ListeningServer(config), state


def serve(
    queue: JobQueue,
    settings: Settings,
    options: ServeOptions,
    *,
    workers: tuple[JobQueue, WorkerConfig] | None,
    on_ready: Callable[[str], object] = lambda _address: None,
    log_file: str = "the log",
    callback_secret: str | None = None,
) -> None:
    """Serve until SIGTERM or Ctrl+C. `workers`: the patient queue and config of the worker
    to supervise (None: `--no-workers`, some other process runs the jobs). Callbacks are
    signed with `callback_secret` (None: the queue's, read at the first try)."""
    server, state = make_server(queue, settings, options, log_file)
    state.own_workers = workers is not None
    policy = CallbackPolicy.from_settings(settings)
    callbacks = CallbackSender(queue, state.records, policy=policy, secret=callback_secret)
    callbacks.start()
    try:
        if workers is None:
            server.on_listening = lambda: on_ready(address(options))
            server.run()  # its own signal handlers: Ctrl+C and SIGTERM stop it
            return
        thread = threading.Thread(target=server.run, name="http", daemon=True)
        thread.start()
        _wait_started(server, thread)
        on_ready(address(options))
        worker_queue, config = workers
        on_message: Callable[[WorkerMessage], object] = state.on_worker_message
        try:
            run_headless(worker_queue, config, settings, on_message=on_message)
        finally:
            server.should_exit = True
            thread.join(timeout=10)
    finally:
        callbacks.stop()


def _wait_started(server: ListeningServer, thread: threading.Thread) -> None:
    while not server.started:
        if not thread.is_alive():
            raise OSError("the HTTP server did not start (is the port taken?)")
        thread.join(timeout=0.05)


def address(options: ServeOptions) -> str:
    host = f"[{options.host}]" if ":" in options.host else options.host
    return f"http://{host}:{options.port}"
