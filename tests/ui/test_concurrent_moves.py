"""Two spawned processes reorder one queue at once, as two windows would: no move is lost.

Each process makes 100 moves through `QueueService` (up, down, top, bottom, before another
job). Every committed write transaction also appends a row to a log table, in the same
transaction, so the log's order is the commit order. Replaying the logged moves one by one
on a fresh store must give the same claim order as the concurrent run: a move decided on
a priority that another move changed meanwhile would break that.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, insert, select

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.db import Database
from app.models.migrations import ensure_schema
from app.models.opening import open_database
from app.ui.presenters.queue_service import Outcome, QueueService

pytestmark = [pytest.mark.both_backends, pytest.mark.timeout(300)]

JOBS = 8
PROCESSES = 2
MOVES_EACH = 100
KINDS = ("up", "down", "top", "bottom", "before")

# A move, by the positions of its jobs in the submission order: (kind, job, other job).
Move = tuple[str, int, int]

LOG = MetaData()
MOVE_LOG = Table(
    "test_move_log", LOG,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("process", Integer, nullable=False),
    Column("step", Integer, nullable=False),
)  # fmt: skip


def planned_moves(process: int) -> list[Move]:
    """Half the jobs are only ever placed (top, bottom, before another), the other half only
    nudged (up, down): a later placement would hide a lost nudge, by placing the job anew."""
    rng = random.Random(process)
    placed, nudged = range(JOBS // 2), range(JOBS // 2, JOBS)
    moves = []
    for _ in range(MOVES_EACH):
        kind = rng.choice(KINDS)
        job = rng.choice(nudged if kind in ("up", "down") else placed)
        other = rng.choice([i for i in range(JOBS) if i != job])
        moves.append((kind, job, other))
    return moves


def make(service: QueueService, move: Move, ids: list[int]) -> Outcome:
    kind, job, other = move
    if kind in ("up", "down"):
        return service.move([ids[job]], 1 if kind == "up" else -1)
    if kind == "before":
        return service.move_before([ids[job]], ids[other])
    return service.move_to([ids[job]], top=kind == "top")


def submit_jobs(queue: JobQueue) -> list[int]:
    return queue.submit_many([GenerationParams(f"job {i}", seed=i) for i in range(JOBS)])


def claim_order(queue: JobQueue, ids: list[int]) -> list[int]:
    """The jobs' positions (in submission order) in the order workers would take them."""
    order = []
    while (job := queue.claim("w")) is not None:
        order.append(ids.index(job.id or 0))
    return order


def log_each_commit(db: Database, process: int, step: list[int]) -> None:
    """Every write transaction that commits also logs (process, step) inside itself."""
    write = db.write

    @contextmanager
    def logged(**kwargs: Any) -> Iterator[Any]:
        with write(**kwargs) as conn:
            yield conn
            conn.execute(insert(MOVE_LOG).values(process=process, step=step[0]))

    db.write = logged  # type: ignore[method-assign]


def move_concurrently(location: str, process: int, ids: list[int], start: Any) -> list[str]:
    db = open_database(location)
    step = [0]
    log_each_commit(db, process, step)
    service = QueueService(JobQueue(db))
    errors: list[str] = []
    service.job(ids[0])  # the lazy imports, before the race
    pause = random.Random(-process)
    start.wait()  # both race from the same moment, not from their spawn times
    for step[0], move in enumerate(planned_moves(process)):
        if step[0] == MOVES_EACH // 2:
            wait_for_a_move_of_the_other(db, process)
        errors.extend(make(service, move, ids).errors)
        time.sleep(pause.uniform(0, 0.0002))  # a process on a busy core could finish first
    db.dispose()
    return errors


def wait_for_a_move_of_the_other(db: Database, process: int) -> None:
    """Halfway, wait until the other process has committed a move: on a busy machine one
    process could otherwise make all its moves before the other starts, and nothing would race."""
    deadline = time.monotonic() + 60
    query = select(MOVE_LOG.c.seq).where(MOVE_LOG.c.process != process).limit(1)
    while time.monotonic() < deadline:
        with db.read() as conn:
            if conn.execute(query).first() is not None:
                return
        time.sleep(0.01)


def replayed_claim_order(commits: list[tuple[int, int]], folder: Path) -> list[int]:
    queue = JobQueue(open_database(str(folder / "replay.db")))
    ids = submit_jobs(queue)
    service = QueueService(queue)
    plans = {process: planned_moves(process) for process in range(PROCESSES)}
    for process, step in commits:
        assert not make(service, plans[process][step], ids).errors
    order = claim_order(queue, ids)
    queue.db.dispose()
    return order


def test_concurrent_moves_end_as_their_serial_replay(db: Database, tmp_path: Path) -> None:
    ensure_schema(db)
    LOG.create_all(db.engine)
    queue = JobQueue(db)
    ids = submit_jobs(queue)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(PROCESSES) as pool:
        start = manager.Barrier(PROCESSES)
        results = pool.starmap(
            move_concurrently, [(db.location, p, ids, start) for p in range(PROCESSES)]
        )

    assert results == [[]] * PROCESSES  # every move was made (all jobs stay queued)
    with db.read() as conn:
        commits = [(p, s) for p, s in conn.execute(select(MOVE_LOG.c.process, MOVE_LOG.c.step)
                                                   .order_by(MOVE_LOG.c.seq))]  # fmt: skip
    assert sorted(commits) == [(p, s) for p in range(PROCESSES) for s in range(MOVES_EACH)]
    assert commits != sorted(commits), "the two processes' moves should have interleaved"
    assert claim_order(queue, ids) == replayed_claim_order(commits, tmp_path)
