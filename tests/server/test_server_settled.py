"""`ServerState.settled`: requests waiting for jobs are woken by the server's own workers'
settles, not left to their next read of the store."""

from __future__ import annotations

import asyncio
import threading
import time

from app.server.state import Settled


def test_a_settle_from_another_thread_wakes_a_waiter_at_once() -> None:
    settled = Settled()

    async def wait() -> float:
        began = time.monotonic()
        seen = settled.count
        threading.Timer(0.05, settled.notify).start()  # the supervisor's thread
        await settled.wait(seen, timeout_s=30)
        return time.monotonic() - began

    assert asyncio.run(wait()) < 5


def test_a_settle_between_the_read_and_the_wait_is_not_missed() -> None:
    settled = Settled()

    async def wait() -> float:
        seen = settled.count  # taken before the waiter read the store
        settled.notify()  # a job settled while it read
        began = time.monotonic()
        await settled.wait(seen, timeout_s=30)
        return time.monotonic() - began

    assert asyncio.run(wait()) < 1


def test_with_no_settle_the_wait_ends_at_its_timeout_and_leaves_no_waiter() -> None:
    settled = Settled()

    async def wait() -> float:
        began = time.monotonic()
        await settled.wait(settled.count, timeout_s=0.1)
        return time.monotonic() - began

    assert 0.09 < asyncio.run(wait()) < 5
    assert not settled._waiting
    settled.notify()  # no loop left to call into: harmless
