"""Who started a worker decides what its job becomes once that program is gone (issue 41.4)."""

from __future__ import annotations

from app.engine.workers.worker import WorkerConfig
from app.engine.workers.worker_states import WINDOW_GONE_REASON, StartedBy


def test_only_a_headless_supervisor_hands_the_job_back() -> None:
    assert [kind for kind in StartedBy if kind.hands_back] == [
        StartedBy.WORKER_COMMAND, StartedBy.SERVER
    ]  # fmt: skip
    assert WorkerConfig("db", "out", "ckpt", "live").started_by is StartedBy.WINDOW


def test_the_pause_names_what_was_gone() -> None:
    assert StartedBy.WINDOW.gone_reason(42) == WINDOW_GONE_REASON  # the relaunch reads it
    assert StartedBy.WORKER_COMMAND.gone_reason(42) == (
        "handing its job back to the queue: the worker supervisor (pid 42) was gone"
    )
    assert StartedBy.SERVER.gone_reason(None) == (
        "handing its job back to the queue: the server was gone"
    )
    assert StartedBy.GENERATE.gone_reason(42) == (
        "paused: the generate command that started its worker was gone"
    )
