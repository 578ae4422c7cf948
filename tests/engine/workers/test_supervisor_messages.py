"""Between polls a headless supervisor hands its workers' messages on as they come
(`wait_for_message`, `messages`), so a job's FINISHED is heard at once, not at the next
poll: a server's waiting A1111 request answers then."""

from __future__ import annotations

import time
from pathlib import Path

from app.engine.jobs.queue import JobQueue
from app.engine.workers.messages import MessageKind, WorkerMessage
from tests.engine.workers.worker_fixtures import WAIT_S, fake_params, harness


def test_a_real_workers_messages_arrive_in_order_without_a_poll(
    queue: JobQueue, tmp_path: Path
) -> None:
    with harness(queue, tmp_path) as h:
        supervisor = h.supervisor()
        supervisor.start()
        heard: list[WorkerMessage] = supervisor.poll()  # starts the worker
        job_id = queue.submit(fake_params(steps=3))
        deadline = time.monotonic() + WAIT_S
        while not any(m.kind is MessageKind.FINISHED for m in heard):
            assert time.monotonic() < deadline, f"no FINISHED among {heard}"
            supervisor.wait_for_message(WAIT_S)  # blocks until the worker says something
            heard += supervisor.messages()
        kinds = [m.kind for m in heard if m.job_id == job_id]
        assert kinds[0] is MessageKind.STARTED and kinds[-1] is MessageKind.FINISHED
        assert kinds.count(MessageKind.FINISHED) == 1


def test_waiting_for_a_message_returns_at_its_timeout_when_none_comes(
    queue: JobQueue, tmp_path: Path
) -> None:
    with harness(queue, tmp_path) as h:
        supervisor = h.supervisor()  # not started: nobody will speak
        began = time.monotonic()
        supervisor.wait_for_message(0.2)
        assert 0.15 < time.monotonic() - began < 5
        assert supervisor.messages() == []
