"""What a slow callback receiver costs (issue 34).

    .venv/bin/python benchmarks/security_callbacks.py [--deadline 10]

A receiver that sends its answer a byte every 5 s gets something at every read, so only a
deadline on the whole try ends it. Here every sender thread of a real `CallbackSender`
(a SQLite queue in a temporary folder, receivers on loopback) is held by such a receiver
at once, the worst case, and then another job is settled. Prints:
- callback_slow_receiver_delay_s: from that job being settled to its callback arriving at
  its (quick) receiver: it waits for the first sender the deadline frees (goal: at most
  the deadline; with fewer slow receivers than senders it waits for none)
- callback_sender_held_s: the longest a slow receiver held its sender, from its POST
  arriving to the sender hanging up (at most the deadline)
- callback_deadline_s: the deadline one try had
- callback_one_slow_receiver_delay_s: the same delay when one slow receiver holds one
  sender (the others free: about one pass of the sender, 0.2 s)

Before issue 34 one thread sent every callback with a 10 s timeout per read: a receiver
sending a byte every 5 s held it for as long as it liked (40 s measured, then the next
server sent the callback again), and every later callback waited behind it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from app.engine.jobs.api_jobs import EASEL_API, ApiJobs
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, NewJobs
from app.models.opening import open_database
from app.server.callbacks import DEADLINE_S, SENDERS, CallbackPolicy, CallbackSender
from tests.server.callback_receiver import Receiver

TRICKLE_EVERY_S = 5.0


@dataclass(frozen=True)
class SlowReceiverCost:
    delay_s: float  # another job's callback, from its settle to its arrival
    held_s: float  # the longest one slow receiver held a sender
    deadline_s: float


def _job_with_callback(queue: JobQueue, url: str) -> int:
    hook = ApiJobs(queue.db).hook(EASEL_API, "benchmark", url)
    [job_id] = queue.submit_keyed(NewJobs([GenerationParams("a cat")]), with_jobs=hook).jobs
    return job_id


def measure(deadline_s: float = DEADLINE_S, slow_receivers: int = SENDERS) -> SlowReceiverCost:
    """Every sender held by a slow receiver, then another job settled (see the module)."""
    slow = Receiver(trickle=slow_receivers, every_s=TRICKLE_EVERY_S, for_s=6 * deadline_s)
    quick = Receiver()
    with tempfile.TemporaryDirectory(prefix="easel-callbacks-") as folder:
        db = open_database(str(Path(folder) / "easel.db"))
        queue = JobQueue(db)
        # Loopback receivers: private networks allowed, as a test's receiver would need.
        policy = CallbackPolicy(allow_private=True, deadline_s=deadline_s)
        sender = CallbackSender(queue, ApiJobs(db), policy=policy)
        try:
            for _ in range(slow_receivers):
                queue.cancel(_job_with_callback(queue, slow.url), source="benchmark")
            other = _job_with_callback(queue, quick.url)
            sender.start()
            if len(slow.wait_for(slow_receivers, timeout_s=30)) < slow_receivers:
                raise RuntimeError("the slow receivers were not all called")
            settled_at = time.monotonic()
            queue.cancel(other, source="benchmark")
            [arrived] = quick.wait_for(1, timeout_s=10 * deadline_s)
            _wait_released(slow, slow_receivers, timeout_s=2 * deadline_s)
        finally:
            sender.stop()
            db.dispose()
            slow.close()
            quick.close()
    held = [post.released - post.arrived for post in slow.posts[:slow_receivers]
            if post.released is not None]  # fmt: skip
    if len(held) < slow_receivers:
        raise RuntimeError("a slow receiver was never let go")
    return SlowReceiverCost(arrived.arrived - settled_at, max(held), deadline_s)


def _wait_released(receiver: Receiver, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(post.released is not None for post in receiver.posts[:count]):
            return
        time.sleep(0.05)


def callback_slow_receiver_delay_s() -> float:
    """How long slow receivers holding every sender delay another job's callback."""
    return measure().delay_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds per try")
    args = parser.parse_args()
    cost = measure(args.deadline)
    print(f"callback_slow_receiver_delay_s: {cost.delay_s:.2f}")
    print(f"callback_sender_held_s: {cost.held_s:.2f}")
    print(f"callback_deadline_s: {cost.deadline_s:g}")
    one = measure(args.deadline, slow_receivers=1)
    print(f"callback_one_slow_receiver_delay_s: {one.delay_s:.2f}")


if __name__ == "__main__":
    main()
