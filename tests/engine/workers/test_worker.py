"""Real worker processes driven by the scripted runner: runs, crashes, cancels, hangs, pauses."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue, params_of
from app.engine.jobs.states import JobStatus
from app.engine.workers.messages import MessageKind, WorkerMessage
from app.engine.workers.worker import Outbox
from app.testing.scripted_runner import fake_image
from tests.engine.workers.worker_fixtures import (
    FAST_SETTINGS,
    Harness,
    broken_runner,
    dead_worker,
    events,
    fake_params,
    harness,
    statuses,
)

pytestmark = pytest.mark.both_backends

S = JobStatus


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path) -> Iterator[Harness]:
    with harness(queue, tmp_path / "home") as h:
        yield h


def test_a_job_runs_to_success_and_the_app_hears_about_it(h: Harness, queue: JobQueue) -> None:
    supervisor = h.supervisor()
    assert supervisor.start().is_empty
    params = fake_params(steps=4)
    job_id = queue.submit(params)
    job = h.wait_settled(job_id)
    assert job.status == S.SUCCESS
    assert Path(job.output_path or "").read_bytes() == fake_image(params_of(job))
    assert (job.progress_step, job.progress_total) == (4, 4)
    assert events(queue, job_id) == ["SUBMIT", "START", "COMPLETE"]
    # Messages follow the database: the app may see the status a moment before the message.
    h.wait_for(lambda: any(m.kind is MessageKind.FINISHED for m in h.messages))
    kinds = [m.kind for m in h.messages if m.job_id in (None, job_id)]
    assert kinds[0] is MessageKind.READY
    assert [k for k in kinds if k is not MessageKind.READY][:2] == [
        MessageKind.STARTED,
        MessageKind.PROGRESS,
    ]
    assert kinds[-1] is MessageKind.FINISHED
    progress = [m.step for m in h.messages if m.kind is MessageKind.PROGRESS]
    assert progress == [1, 2, 3, 4]
    assert supervisor.start_failures == 0


def test_sigkill_mid_job_times_out_then_is_retried_to_success(h: Harness, queue: JobQueue) -> None:
    supervisor = h.supervisor()
    supervisor.start()
    job_id = queue.submit(fake_params("step=0.05", steps=40))
    h.wait_progress(job_id, 2)
    [pid] = supervisor.worker_pids()
    os.kill(pid, signal.SIGKILL)
    job = h.wait_settled(job_id)
    assert job.status == S.SUCCESS
    assert statuses(queue, job_id) == [
        "PENDING", "PROCESSING", "TIMEOUT", "PENDING", "PROCESSING", "SUCCESS"
    ]  # fmt: skip
    timeline = queue.timeline(job_id)
    assert timeline[2].source == "supervisor" and "exited (code -9)" in timeline[2].message
    assert timeline[3].source == "retry-policy" and "automatic retry 2 of 3" in timeline[3].message
    assert [t.attempt for t in timeline] == [1, 1, 1, 2, 2, 2]
    assert supervisor.worker_pids() != [pid]  # restarted


def test_an_orphaned_job_is_recovered_before_the_workers_start_then_runs(
    h: Harness, queue: JobQueue
) -> None:
    job_id = queue.submit(fake_params())
    queue.claim(dead_worker())  # the last session died while its worker held the job
    report = h.supervisor().start()
    assert report.requeued == [job_id]
    assert h.wait_settled(job_id).status == S.SUCCESS
    timeline = queue.timeline(job_id)
    assert [(t.to_status, t.source) for t in timeline[2:4]] == [
        ("TIMEOUT", "recovery"), ("PENDING", "retry-policy")
    ]  # fmt: skip
    assert statuses(queue, job_id)[-2:] == ["PROCESSING", "SUCCESS"]


def test_a_frozen_worker_is_timed_out_by_the_watchdog_and_replaced(
    h: Harness, queue: JobQueue
) -> None:
    supervisor = h.supervisor()
    supervisor.start()
    job_id = queue.submit(fake_params("step=0.05", steps=40))
    h.wait_progress(job_id, 2)
    [pid] = supervisor.worker_pids()
    os.kill(pid, signal.SIGSTOP)  # alive, but no heartbeat: only the watchdog can tell
    job = h.wait_settled(job_id)
    assert job.status == S.SUCCESS
    timeout_row = queue.timeline(job_id)[2]
    assert (timeout_row.event, timeout_row.source) == ("TIMEOUT", "watchdog")
    assert "no heartbeat" in timeout_row.message


def test_cancel_during_a_step_stops_within_one_step(h: Harness, queue: JobQueue) -> None:
    step_s = 0.3
    h.supervisor().start()
    job_id = queue.submit(fake_params(f"step={step_s}", steps=50))
    h.wait_progress(job_id, 2)
    cancelled_at = time.monotonic()
    queue.cancel(job_id)
    # Read after the cancel committed: any step reported later saw CANCELLING.
    at_cancel = queue.get(job_id).progress_step
    job = h.wait_status(job_id, S.CANCELLED)
    assert time.monotonic() - cancelled_at < 2 * step_s + 1.0
    assert job.progress_step <= at_cancel + 1
    assert job.output_path is None
    assert events(queue, job_id)[-2:] == ["CANCEL", "STOPPED"]


def test_cancel_while_the_worker_hangs_kills_it_within_the_grace_period(
    h: Harness, queue: JobQueue
) -> None:
    supervisor = h.supervisor()
    supervisor.start()
    job_id = queue.submit(fake_params("hang"))
    h.wait_status(job_id, S.PROCESSING)
    [pid] = supervisor.worker_pids()
    cancelled_at = time.monotonic()
    queue.cancel(job_id)
    h.wait_status(job_id, S.CANCELLED)
    assert time.monotonic() - cancelled_at < FAST_SETTINGS.cancel_grace_s + 1.5
    last = queue.timeline(job_id)[-1]
    assert (last.event, last.source) == ("TIMEOUT", "supervisor")
    assert "did not stop within 1s" in last.message
    h.wait_for(lambda: len(supervisor.worker_pids()) == 1 and supervisor.worker_pids() != [pid])


def test_a_worker_hung_outside_the_step_loop_settles_its_job_and_is_replaced(
    h: Harness, queue: JobQueue
) -> None:
    supervisor = h.supervisor(stall_limit_s=0.5)  # its heartbeat thread alone would beat on
    supervisor.start()
    job_id = queue.submit(fake_params("hang"), max_attempts=1)
    h.wait_status(job_id, S.PROCESSING)
    [pid] = supervisor.worker_pids()
    job = h.wait_settled(job_id)
    assert (job.status, job.given_up) == (S.TIMEOUT, True)
    timeout_row = queue.timeline(job_id)[-1]
    # Its own heartbeat thread settles it, saying what happened (issue 21 item 2).
    assert (timeout_row.event, timeout_row.source) == ("TIMEOUT", "worker")
    assert "stuck: no step finished" in timeout_row.message
    assert "after the claim (limit 0.5 s)" in timeout_row.message
    h.wait_for(lambda: len(supervisor.worker_pids()) == 1 and supervisor.worker_pids() != [pid])


def test_a_job_that_kills_its_worker_every_time_is_quarantined(h: Harness, queue: JobQueue) -> None:
    h.supervisor().start()
    job_id = queue.submit(fake_params("crash@2"), max_attempts=3)
    job = h.wait_settled(job_id)
    assert (job.status, job.given_up, job.attempt) == (S.TIMEOUT, True, 3)
    assert (job.error or "").startswith("quarantined: its worker died")
    assert events(queue, job_id).count("TIMEOUT") == 3
    # The replacement workers still serve everyone else.
    assert h.wait_settled(queue.submit(fake_params(steps=2))).status == S.SUCCESS


def test_transient_failures_are_retried_and_others_are_not(h: Harness, queue: JobQueue) -> None:
    h.supervisor().start()
    oom = queue.submit(fake_params("oom"), max_attempts=2)
    bug = queue.submit(fake_params("fail"), max_attempts=2)
    oom_job, bug_job = h.wait_settled(oom), h.wait_settled(bug)
    assert (oom_job.status, oom_job.attempt, oom_job.given_up) == (S.FAILED, 2, True)
    assert (oom_job.error or "").startswith("gave up after 2 of 2 attempts (MemoryError")
    assert (bug_job.status, bug_job.attempt, bug_job.given_up) == (S.FAILED, 1, True)
    assert (oom_job.error_transient, bug_job.error_transient) == (True, False)  # own column
    assert "not transient" in (bug_job.error or "")
    # A user can still retry by hand; that clears the given-up mark.
    queue.retry(bug)
    assert not queue.get(bug).given_up


def test_pause_then_resume_finishes_from_the_checkpoint(h: Harness, queue: JobQueue) -> None:
    h.supervisor().start()
    params = fake_params("step=0.05", steps=30)
    job_id = queue.submit(params)
    h.wait_progress(job_id, 3)
    queue.pause(job_id)
    paused = h.wait_status(job_id, S.PAUSED)
    assert paused.checkpoint_path and Path(paused.checkpoint_path).exists()
    queue.resume(job_id)
    job = h.wait_settled(job_id)
    assert job.status == S.SUCCESS
    assert Path(job.output_path or "").read_bytes() == fake_image(params_of(job))
    progress = [m.step for m in h.messages if m.kind is MessageKind.PROGRESS]
    assert progress.count(1) == 1  # resumed where it stopped, not from the start
    assert statuses(queue, job_id)[-4:] == ["PAUSED", "PENDING", "PROCESSING", "SUCCESS"]


def test_shutdown_pauses_running_jobs_and_a_new_launch_resumes_them(
    h: Harness, queue: JobQueue
) -> None:
    first = h.supervisor()
    first.start()
    job_id = queue.submit(fake_params("step=0.05", steps=40))
    h.wait_progress(job_id, 2)
    assert first.shutdown(timeout=10) == [job_id]
    assert first.worker_pids() == []
    job = queue.get(job_id)
    assert job.status == S.PAUSED and job.checkpoint_path
    assert queue.timeline(job_id)[-2].source == "supervisor"  # PAUSE, "the app is closing"
    h.supervisors.remove(first)
    h.supervisor().start()
    queue.resume(job_id)
    assert h.wait_settled(job_id).status == S.SUCCESS


def test_a_worker_that_cannot_start_is_restarted_with_backoff_not_in_a_loop(
    h: Harness, queue: JobQueue
) -> None:
    supervisor = h.supervisor(runner_factory=broken_runner)
    supervisor.start()
    job_id = queue.submit(fake_params())
    seen: set[int] = set()
    deadline = time.monotonic() + 3.5

    def look() -> bool:
        seen.update(supervisor.worker_pids())
        return time.monotonic() > deadline

    h.wait_for(look)
    assert 1 <= len(seen) <= 3  # spawned at 0 s, then after 1 s, 2 s, 4 s... of backoff
    assert events(queue, job_id) == ["SUBMIT"]  # never claimed, never touched
    h.wait_for(lambda: supervisor.start_failures >= 2, what="the failures to be counted")


def test_the_outbox_never_blocks_the_worker_when_the_app_does_not_read() -> None:
    unblock = threading.Event()
    outbox = Outbox(lambda _message: unblock.wait(), capacity=2)
    started = time.monotonic()
    for step in range(50):
        outbox.send(WorkerMessage(MessageKind.PROGRESS, "w", 1, step=step), droppable=True)
    assert time.monotonic() - started < 0.5
    unblock.set()
    outbox.close()
