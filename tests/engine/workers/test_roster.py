"""The Workers panel's data: the worker table, what job rows add, and drain/stop requests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Connection

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.engine.workers.presence import FORGET_AFTER_S, Presence
from app.engine.workers.roster import list_workers, request_workers
from app.engine.workers.worker_states import FROM_PANEL, WorkerRequest, WorkerState, WorkerSummary
from app.errors import BadInput
from app.models.db import Database
from tests.engine.workers.worker_fixtures import fake_params

pytestmark = pytest.mark.both_backends

GPU = "gpu-box:77:cafe"
LAPTOP = "laptop:12:beef"
TIMEOUT_S = 15.0


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def presence(db: Database, worker_id: str, machine: str, clock: Clock) -> Presence:
    return Presence(db, worker_id, machine, clock=clock)


def listed(queue: JobQueue, clock: Clock) -> dict[str, WorkerSummary]:
    return {w.worker_id: w for w in list_workers(queue, timeout_s=TIMEOUT_S, now=clock.now)}


def test_a_worker_registers_beats_and_exits(db: Database, queue: JobQueue) -> None:
    clock = Clock()
    gpu = presence(db, GPU, "gpu-box", clock)
    gpu.register(device="cuda/float16")
    assert listed(queue, clock)[GPU].state is WorkerState.STARTING
    gpu.update(WorkerState.IDLE, model="easel-tiny")
    clock.now += 12.0
    assert gpu.beat(WorkerState.IDLE) is None
    clock.now += 4.0  # 16 s after the state change, 4 s after the beat: alive
    worker = listed(queue, clock)[GPU]
    assert (worker.state, worker.device, worker.model) == (
        WorkerState.IDLE, "cuda/float16", "easel-tiny"
    )  # fmt: skip
    assert worker.last_heard_s == pytest.approx(4.0)
    gpu.update(WorkerState.EXITED)
    clock.now += 3600.0
    assert listed(queue, clock)[GPU].state is WorkerState.EXITED  # exited, never "lost"


@pytest.mark.sqlite_only
def test_a_workers_row_is_written_without_waiting_for_the_disk(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row is for people, and a power cut that undoes a write of it also ended its
    worker: its commits skip the disk's wait (NORMAL), two of which came between every
    two jobs; the connection is back to FULL for the next write (a job's result)."""
    levels: list[int] = []
    write = db.write

    @contextmanager
    def recording(**kwargs: Any) -> Iterator[Connection]:
        with write(**kwargs) as conn:
            levels.append(conn.exec_driver_sql("PRAGMA synchronous").scalar_one())
            yield conn

    monkeypatch.setattr(db, "write", recording)
    gpu = presence(db, GPU, "gpu-box", Clock())
    gpu.register(device="cpu")
    gpu.update(WorkerState.BUSY, current_job=1)
    gpu.beat(WorkerState.BUSY)
    assert levels == [1, 1, 1]  # NORMAL
    with db.write() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar_one() == 2  # FULL


def test_a_worker_not_heard_from_for_the_timeout_is_lost(db: Database, queue: JobQueue) -> None:
    clock = Clock()
    gpu = presence(db, GPU, "gpu-box", clock)
    gpu.register(device=None)
    gpu.update(WorkerState.BUSY)
    clock.now += TIMEOUT_S - 1
    assert listed(queue, clock)[GPU].state is WorkerState.BUSY
    clock.now += 2
    assert listed(queue, clock)[GPU].state is WorkerState.LOST


def test_the_job_in_hand_and_its_heartbeat_come_from_the_job_table(
    db: Database, queue: JobQueue
) -> None:
    clock = Clock()
    presence(db, GPU, "gpu-box", clock).register(device=None)
    job_id = queue.submit(fake_params())
    assert queue.claim(GPU, job_id=job_id) is not None
    queue.heartbeat(job_id, GPU)  # now, by the wall clock: far after the row's last beat
    worker = listed(queue, Clock(time.time()))[GPU]
    assert worker.current_job == job_id and worker.state is WorkerState.STARTING
    queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id=GPU)
    assert listed(queue, clock)[GPU].current_job is None


def test_a_job_holder_without_a_row_is_listed_too(queue: JobQueue) -> None:
    job_id = queue.submit(fake_params())
    assert queue.claim(LAPTOP, job_id=job_id) is not None
    worker = list_workers(queue, timeout_s=TIMEOUT_S, now=time.time())[0]
    assert (worker.worker_id, worker.machine, worker.state, worker.current_job) == (
        LAPTOP, "laptop", WorkerState.BUSY, job_id
    )  # fmt: skip


def test_rows_gone_for_a_week_are_forgotten_when_a_worker_starts(
    db: Database, queue: JobQueue
) -> None:
    clock = Clock()
    old = presence(db, LAPTOP, "laptop", clock)
    old.register(device=None)
    old.update(WorkerState.EXITED)
    clock.now += FORGET_AFTER_S - 10
    presence(db, GPU, "gpu-box", clock).register(device=None)
    assert set(listed(queue, clock)) == {LAPTOP, GPU}
    clock.now += 20
    presence(db, "gpu-box:78:f00d", "gpu-box", clock).register(device=None)
    assert LAPTOP not in listed(queue, clock)


def test_drain_and_stop_are_written_on_the_named_workers_and_read_by_their_beat(
    db: Database, queue: JobQueue
) -> None:
    clock = Clock()
    rows = {wid: presence(db, wid, wid.split(":")[0], clock) for wid in (GPU, LAPTOP)}
    for row in rows.values():
        row.register(device=None)
    asked = request_workers(
        queue, "gpu-box", WorkerRequest.DRAIN, requested_by=FROM_PANEL, timeout_s=TIMEOUT_S,
        now=clock.now,
    )  # fmt: skip
    assert [w.worker_id for w in asked] == [GPU]
    assert rows[GPU].beat(WorkerState.DRAINING) == (WorkerRequest.DRAIN, FROM_PANEL)
    assert rows[LAPTOP].beat(WorkerState.IDLE) is None
    by_token = "beef"
    request_workers(
        queue, by_token, WorkerRequest.STOP, requested_by=FROM_PANEL, timeout_s=TIMEOUT_S,
        now=clock.now,
    )  # fmt: skip
    request_workers(
        queue, LAPTOP, WorkerRequest.DRAIN, requested_by="the command line",
        timeout_s=TIMEOUT_S, now=clock.now,
    )  # fmt: skip
    assert rows[LAPTOP].beat(WorkerState.STOPPING) == (WorkerRequest.STOP, FROM_PANEL)


def test_a_bad_name_or_a_gone_worker_is_refused_in_one_sentence(
    db: Database, queue: JobQueue
) -> None:
    clock = Clock()
    gone = presence(db, GPU, "gpu-box", clock)
    gone.register(device=None)
    gone.update(WorkerState.EXITED)
    with pytest.raises(BadInput, match=r"^no worker is called 'nobody'"):
        request_workers(
            queue, "nobody", WorkerRequest.STOP, requested_by=FROM_PANEL, timeout_s=TIMEOUT_S
        )
    with pytest.raises(BadInput, match=r"^worker 'gpu-box' has exited: there is nothing"):
        request_workers(
            queue, "gpu-box", WorkerRequest.STOP, requested_by=FROM_PANEL, timeout_s=TIMEOUT_S,
            now=clock.now,
        )  # fmt: skip


def test_no_workers(queue: JobQueue) -> None:
    assert list_workers(queue, timeout_s=TIMEOUT_S) == []


def test_a_worker_known_only_from_its_job_cannot_be_asked(queue: JobQueue) -> None:
    job_id = queue.submit(fake_params())
    assert queue.claim(LAPTOP, job_id=job_id) is not None
    with pytest.raises(BadInput, match=r"older Easel that cannot be asked to drain or stop"):
        request_workers(
            queue, "laptop", WorkerRequest.DRAIN, requested_by=FROM_PANEL, timeout_s=TIMEOUT_S
        )


def test_a_worker_whose_row_was_never_written_writes_it_at_its_next_beat(
    db: Database, queue: JobQueue
) -> None:
    clock = Clock()
    gpu = presence(db, GPU, "gpu-box", clock)  # its register failed: the server was away
    assert gpu.beat(WorkerState.BUSY) is None
    assert listed(queue, clock)[GPU].state is WorkerState.BUSY


def test_the_models_a_worker_holds_are_listed_until_it_is_gone(
    db: Database, queue: JobQueue
) -> None:
    clock = Clock()
    gpu = presence(db, GPU, "gpu-box", clock)
    gpu.register(device="cuda/float16")
    gpu.update(WorkerState.IDLE, models='["sdxl", "sd15"]')
    assert listed(queue, clock)[GPU].models == ("sdxl", "sd15")
    clock.now += TIMEOUT_S + 1  # lost: it holds nothing anyone can use
    assert listed(queue, clock)[GPU].models == ()
