"""A1111 requests waiting for their jobs, woken by a settle of the server's own workers
(`Settled`) and answered by one reader for all of them (`JobWaits`).

Each waiting request used to read its own jobs' statuses every poll, on the handlers'
thread pool: 400 waiting requests made 8,000 small reads a second queue in front of
`/progress` and `/interrupt` (a second each). One reader task reads the statuses of every
job waited for in one query a poll (in chunks the driver takes) and wakes the requests
whose jobs are all done; it runs only while a request waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from starlette.concurrency import run_in_threadpool

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus

Gone = Callable[[], Awaitable[bool]]  # whether the client went away


class Settled:
    """Wakes the requests that wait for jobs (A1111's txt2img) the moment one of this
    server's own workers settles a job, so that they need not read the store many times a
    second to answer soon. A waiter takes `count` before it reads the store and waits for
    a settle after that: one that lands between its read and its wait is not missed."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()
        self._waiting: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def notify(self) -> None:
        """From the supervisor's thread: a job was settled (its transition committed)."""
        with self._lock:
            self.count += 1
            waiting = list(self._waiting)
        for loop, event in waiting:
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits there
                loop.call_soon_threadsafe(event.set)

    async def wait(self, after: int, timeout_s: float) -> None:
        """Until a job settles after `count` was `after`, or `timeout_s` passes."""
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            if self.count != after:
                return
            self._waiting.add(entry)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout_s)
        finally:
            with self._lock:
                self._waiting.discard(entry)


@dataclass(eq=False)
class _Waiter:
    job_ids: frozenset[int]
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    failure: BaseException | None = None


class JobWaits:
    """`until_done` for every waiting request of one server (one event loop)."""

    def __init__(self, queue: JobQueue, settled: Settled) -> None:
        self.queue = queue
        self.settled = settled
        self._waiters: set[_Waiter] = set()
        self._reader: asyncio.Task[None] | None = None

    async def until_done(self, job_ids: Sequence[int], poll_s: float, gone: Gone) -> None:
        """Until every job of `job_ids` is done (`_done_row`) or the client went away
        (`gone`, asked once a second), or the reader's failure (a locked store: 503)."""
        if set(job_ids) <= await run_in_threadpool(done_ids, self.queue, job_ids):
            return  # done already (a replayed request): no wait for the reader's next poll
        waiter = _Waiter(frozenset(job_ids))
        self._waiters.add(waiter)
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._read(poll_s))
        try:
            while not waiter.woken.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.woken.wait(), GONE_CHECK_S)
                if not waiter.woken.is_set() and await gone():
                    return  # nobody to answer; the jobs carry on, durable as any other
        finally:
            self._waiters.discard(waiter)
        if waiter.failure is not None:
            raise waiter.failure

    async def _read(self, poll_s: float) -> None:
        while self._waiters:
            seen = self.settled.count
            waiting = list(self._waiters)
            wanted = {job_id for waiter in waiting for job_id in waiter.job_ids}
            try:
                done = await run_in_threadpool(done_ids, self.queue, wanted)
            except Exception as failure:  # each request answers it (503 for a locked store)
                for waiter in waiting:
                    waiter.failure = failure
                    waiter.woken.set()
                    self._waiters.discard(waiter)
                continue
            for waiter in waiting:
                if waiter.job_ids <= done:
                    waiter.woken.set()
                    self._waiters.discard(waiter)
            if self._waiters:
                await self.settled.wait(seen, poll_s)


GONE_CHECK_S = 1.0  # how often a waiting request asks whether its client is still there


def done_ids(queue: JobQueue, job_ids: Iterable[int]) -> set[int]:
    """Which of `job_ids` a request waits no more for (a job not found is not done)."""
    return {
        job_id
        for job_id, status, given_up, transient in queue.endings(job_ids)
        if _done_row(status, given_up, transient)
    }


def _done_row(status: str, given_up: bool, error_transient: bool | None) -> bool:
    """A job the request waits no more for: finished, cancelled, given up (`retry.is_settled`)
    or failed with a lasting error."""
    if status == JobStatus.FAILED.value:
        return bool(given_up) or not error_transient
    if status == JobStatus.TIMEOUT.value:
        return bool(given_up)
    return JobStatus(status).is_terminal
