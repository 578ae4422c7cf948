"""Recovery at launch, the watchdog, the retry policy and worker identity (no workers)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy, apply_retry_policy, failure_changes
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.workers.liveness import LivenessLock, WorkerIdentity, is_alive, new_token, this_host
from app.engine.workers.recovery import RecoveryReport, recover
from app.engine.workers.watchdog import time_out_stale_jobs
from tests.engine.workers.worker_fixtures import dead_worker

pytestmark = pytest.mark.both_backends
S, E = JobStatus, JobEvent
POLICY = RetryPolicy(base_delay_s=2.0, max_delay_s=10.0)
TIMEOUT_S = 15.0


def running_job(queue: JobQueue, worker_id: str, status: JobStatus = S.PROCESSING) -> int:
    job_id = queue.submit(GenerationParams("a cat", steps=4, seed=1))
    assert queue.claim(worker_id) is not None
    if status is S.CANCELLING:
        queue.cancel(job_id)
    elif status is S.PAUSING:
        queue.pause(job_id)
    return job_id


def run_recovery(queue: JobQueue, folder: Path, now: float | None = None) -> RecoveryReport:
    return recover(
        queue, liveness_dir=folder, heartbeat_timeout_s=TIMEOUT_S, policy=POLICY, now=now
    )


# --- identity --------------------------------------------------------------------------------


def test_worker_ids_round_trip_and_foreign_ids_are_not_identities() -> None:
    identity = WorkerIdentity("my-host.local", 4242, "abc123")
    assert WorkerIdentity.parse(str(identity)) == identity
    assert WorkerIdentity.parse("w1") is None
    assert WorkerIdentity.parse(None) is None


def test_alive_means_the_lock_is_held_not_that_the_pid_exists(tmp_path: Path) -> None:
    token = new_token()
    identity = WorkerIdentity(this_host(), os.getpid(), token)
    assert not is_alive(identity, tmp_path)  # our pid exists, but it is not that worker
    with LivenessLock(tmp_path, token):
        assert is_alive(identity, tmp_path)
    assert not is_alive(identity, tmp_path)
    assert not (tmp_path / f"{token}.lock").exists()


# --- recovery --------------------------------------------------------------------------------


def test_an_orphaned_processing_job_is_requeued_at_launch(queue: JobQueue, tmp_path: Path) -> None:
    job_id = running_job(queue, dead_worker())
    report = run_recovery(queue, tmp_path)
    assert report.requeued == [job_id]
    job = queue.get(job_id)
    assert (job.status, job.attempt) == (S.PENDING, 2)
    assert job.not_before is not None and job.not_before > time.time()
    timeout_row = queue.timeline(job_id)[-2]
    assert (timeout_row.event, timeout_row.source) == ("TIMEOUT", "recovery")
    assert report.lines() == [f"requeued: #{job_id}"]


def test_a_cancel_wins_and_a_pause_keeps_its_checkpoint(queue: JobQueue, tmp_path: Path) -> None:
    cancelling = running_job(queue, dead_worker(), S.CANCELLING)
    pausing = running_job(queue, dead_worker(), S.PAUSING)
    report = run_recovery(queue, tmp_path)
    assert (report.cancelled, report.paused, report.requeued) == ([cancelling], [pausing], [])
    assert queue.get(cancelling).status == S.CANCELLED
    assert queue.get(pausing).status == S.PAUSED


def test_jobs_of_live_workers_are_left_alone(queue: JobQueue, tmp_path: Path) -> None:
    token = new_token()
    with LivenessLock(tmp_path, token):
        local = running_job(queue, str(WorkerIdentity(this_host(), os.getpid(), token)))
        remote = running_job(queue, "other-host:17:abcdef")  # fresh heartbeat
        report = run_recovery(queue, tmp_path)
    assert sorted(report.still_running) == [local, remote]
    assert report.is_empty
    assert queue.get(local).status == queue.get(remote).status == S.PROCESSING
    # Once the remote heartbeat is stale, the other host's worker counts as gone.
    later = run_recovery(queue, tmp_path, now=time.time() + TIMEOUT_S + 1)
    assert remote in later.requeued


def test_a_job_out_of_attempts_is_given_up(queue: JobQueue, tmp_path: Path) -> None:
    job_id = queue.submit(GenerationParams("a cat", steps=4, seed=1), max_attempts=1)
    queue.claim(dead_worker())
    report = run_recovery(queue, tmp_path)
    assert (report.given_up, report.quarantined) == ([job_id], [job_id])
    job = queue.get(job_id)
    assert (job.status, job.given_up) == (S.TIMEOUT, True)
    assert (job.error or "").startswith("quarantined")


# --- watchdog --------------------------------------------------------------------------------


def test_the_watchdog_times_out_only_stale_heartbeats(queue: JobQueue) -> None:
    stale = running_job(queue, "w1")
    fresh = running_job(queue, "w2")
    now = time.time() + TIMEOUT_S + 1
    JobQueue(queue.db, clock=lambda: now).heartbeat(fresh, "w2")
    [done] = time_out_stale_jobs(queue, TIMEOUT_S, now=now)
    assert done.record.job_id == stale and done.record.to_status is S.TIMEOUT
    assert queue.get(fresh).status == S.PROCESSING


def test_the_watchdog_leaves_a_job_that_moved_on(queue: JobQueue) -> None:
    job_id = running_job(queue, "w1")
    queue.fire(job_id, E.COMPLETE, source="w1", worker_id="w1")
    assert time_out_stale_jobs(queue, TIMEOUT_S, now=time.time() + 100) == []
    assert queue.get(job_id).status == S.SUCCESS


# --- retry policy ----------------------------------------------------------------------------


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [POLICY.delay_s(a) for a in range(1, 6)] == [2.0, 4.0, 8.0, 10.0, 10.0]


@pytest.mark.parametrize(
    ("error", "transient", "retried"),
    [(MemoryError("CUDA out of memory"), True, True), (ValueError("bad"), False, False)],
)
def test_only_transient_failures_are_retried(
    queue: JobQueue, error: Exception, transient: bool, retried: bool
) -> None:
    job_id = running_job(queue, "w1")
    failure = failure_changes(error)
    assert failure["error_transient"] is transient
    message = failure["error"]
    queue.fire(job_id, E.FAIL, source="worker", worker_id="w1", message=message, changes=failure)
    decisions = apply_retry_policy(queue, POLICY, now=1000.0)
    assert (decisions.requeued == [job_id]) is retried
    job = queue.get(job_id)
    if retried:
        assert (job.status, job.not_before, job.given_up) == (S.PENDING, 1002.0, False)
    else:
        assert (job.status, job.given_up) == (S.FAILED, True)
        assert job.error == f"not retried automatically, the error is not transient ({message})"
    assert apply_retry_policy(queue, POLICY).requeued == []  # decided once


def test_a_job_retried_by_the_user_meanwhile_is_not_marked_given_up(queue: JobQueue) -> None:
    job_id = running_job(queue, "w1")
    queue.fire(job_id, E.FAIL, source="worker", worker_id="w1", message="error: x")
    version = queue.get(job_id).version
    queue.retry(job_id)  # the user, between the policy's read and its write
    assert not queue.mark_given_up(job_id, "too late", version=version)
    assert not queue.get(job_id).given_up


# --- saved progress of a requeued job (issue 28.3) -------------------------------------------


def _checkpoint_bytes(steps_done: int) -> bytes:
    import torch

    from app.engine.generation.loop.checkpoint import Checkpoint, encode_checkpoint

    return encode_checkpoint(
        Checkpoint(
            params={"prompt": "a cat"}, steps_done=steps_done, index=steps_done, elapsed_s=1.0,
            latents=torch.zeros(1, 4, 8, 8), generator_state=torch.zeros(8, dtype=torch.uint8),
            family="sd", conditioning={}, scheduler_class="EulerDiscreteScheduler",
            scheduler_state={},
        )
    )  # fmt: skip


def test_a_requeued_job_shows_the_step_its_saved_checkpoint_reached(
    queue: JobQueue, tmp_path: Path
) -> None:
    """The row said "queued · 4 steps" although the job continues from its rolling
    checkpoint: the retry keeps the checkpoint's step (not the last step reported, which
    ran past it), read from the file's header, or from the database's copy on a shared
    store when this machine has no file."""
    from app.engine import paths
    from app.engine.generation.loop.checkpoint_files import Claim
    from app.engine.outputs.kinds import FileKind
    from app.engine.store.stored_files import store_file

    worker = dead_worker()
    job_id = running_job(queue, worker)
    without = running_job(queue, dead_worker())
    job = queue.get(job_id)
    claim = Claim(paths.checkpoints_dir(), job_id, job.attempt, job.version)
    claim.file.write_bytes(_checkpoint_bytes(steps_done=2))
    queue.report_progress(job_id, worker, 3, 4)  # reported after the checkpoint was saved
    if queue.db.shares_files:
        assert store_file(queue.db, job, FileKind.CHECKPOINT, claim.file, worker_id=worker,
                          claim=job.version)  # fmt: skip
        claim.file.unlink()
    report = run_recovery(queue, tmp_path)
    assert sorted(report.requeued) == sorted([job_id, without])
    job = queue.get(job_id)
    assert (job.status, job.progress_step, job.attempt) == (S.PENDING, 2, 2)
    assert queue.timeline(job_id)[-1].message.endswith("; continues from saved step 2")
    assert queue.get(without).progress_step == 0
    assert "continues" not in queue.timeline(without)[-1].message
