"""`python -m app worker`: a headless worker, kept alive the way the window keeps its own.

The command's process is a `Supervisor` of one worker process, so a headless machine gets
what the window gives its workers: a worker whose step got stuck settles its job and ends,
and a fresh one takes its place (the queue does not sit PENDING behind it); one frozen
whole (its heartbeat stale) is killed by the supervisor's watchdog pass and replaced; one
that does not reach a step within the grace period after a cancel or pause is killed and
its job settled through the table (CANCELLED, PAUSED).

SIGTERM and Ctrl+C still pause the job in hand at its next step: the signal is passed on to
the worker, whose own handler pauses it ("the worker is stopping"), and the command waits
for it to leave. A worker that leaves when asked (drain, stop on its row) or that found no
more work (`--until-idle`) is not replaced, and the command ends with it.

A command killed outright (SIGKILL) leaves its worker to notice alone: the worker's config
says a headless supervisor started it (`StartedBy.WORKER_COMMAND`, `SERVER` for `serve`),
so it hands the job in hand back to the queue with its checkpoint at the next step, for
any worker of the farm, rather than leaving it PAUSED for a person (the window's policy).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy
from app.engine.settings import Settings
from app.engine.workers.maintenance import Maintenance
from app.engine.workers.messages import WorkerMessage
from app.engine.workers.supervisor import Supervisor
from app.engine.workers.worker import WorkerConfig

log = logging.getLogger(__name__)

POLL_S = 0.1
MAX_START_FAILURES = 3  # the worker died before it was ready this many times in a row
# After SIGTERM, how long the worker may take to reach its next step and pause (a stuck
# step ends the worker sooner by itself); then it is killed and its job settled.
STOP_TIMEOUT_S = 120.0


class WorkerCannotStart(Exception):
    """The worker process keeps dying before it is ready: a broken install or model."""


def run_headless(
    queue: JobQueue,
    config: WorkerConfig,
    settings: Settings,
    *,
    on_message: Callable[[WorkerMessage], object] = lambda _message: None,
    policy: RetryPolicy | None = None,
    prune_settings: Callable[[], Settings] | None = None,
) -> None:
    """Run one supervised worker until a signal, a drain or stop on its row, or (with
    `until_idle`) an empty queue. `prune_settings`: where pruning reads the user's
    retention settings (None: never prune)."""
    policy = policy or RetryPolicy()
    maintenance = Maintenance(
        queue, heartbeat_timeout_s=settings.heartbeat_timeout_s, policy=policy,
        settings=prune_settings,
    )  # fmt: skip
    supervisor = Supervisor(
        queue, config, settings, policy=policy, workers=1, recover_at_start=False,
        maintenance_interval_s=maintenance.interval_s,
    )  # fmt: skip
    with _stop_signals() as stop_asked:
        maintenance.run_once()  # before the first claim: a job stranded by a dead worker goes first
        supervisor.start()
        try:
            _supervise(supervisor, maintenance, on_message, stop_asked)
            if stop_asked():
                _pass_on_stop(supervisor)
        finally:
            supervisor.shutdown(timeout=STOP_TIMEOUT_S, pause_running=False)
        for message in supervisor.poll():
            on_message(message)


def _supervise(
    supervisor: Supervisor,
    maintenance: Maintenance,
    on_message: Callable[[WorkerMessage], object],
    stop_asked: Callable[[], bool],
) -> None:
    """`poll` every POLL_S (it reads the store); between polls the workers' messages are
    handed on as they come, so a job's FINISHED reaches `on_message` at once (a server's
    waiting A1111 request answers then), not at the next poll."""
    next_poll = 0.0
    while not (stop_asked() or supervisor.all_retired):
        now = time.monotonic()
        if now >= next_poll:
            messages, next_poll = supervisor.poll(), now + POLL_S
        else:
            messages = supervisor.messages()
        for message in messages:
            on_message(message)
        if supervisor.start_failures >= MAX_START_FAILURES:
            raise WorkerCannotStart(
                f"the worker process failed to start {supervisor.start_failures} times"
            )
        maintenance.prune_if_due()
        supervisor.wait_for_message(next_poll - time.monotonic())


def _pass_on_stop(supervisor: Supervisor) -> None:
    """The worker pauses its job at the next step and leaves (its own SIGTERM handler)."""
    for pid in supervisor.worker_pids():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue  # it left meanwhile


@contextmanager
def _stop_signals() -> Iterator[Callable[[], bool]]:
    """SIGTERM and SIGINT set a flag (read by the loop), restored afterwards."""
    asked: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %s: pausing the job in hand, then stopping", signum)
        asked.append(signum)

    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {signum: signal.signal(signum, handler) for signum in signals}
    try:
        yield lambda: bool(asked)
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
