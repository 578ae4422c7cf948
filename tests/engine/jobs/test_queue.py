"""The queue service on a real SQLite file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import func, select

import app.engine.jobs.queue as queue_module
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.queue import (
    JobNotFound,
    JobQueue,
    NotHoldingJob,
    RequestRefused,
    TransitionRecord,
)
from app.engine.jobs.states import JobEvent, JobStatus, TransitionNotAllowed
from app.engine.store.opening import open_queue
from app.models.db import Database
from app.models.tables import TRANSITION

pytestmark = pytest.mark.both_backends
S, E = JobStatus, JobEvent
PARAMS = GenerationParams("a red circle on a blue background", steps=4)


def history_count(queue: JobQueue) -> int:
    with queue.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(TRANSITION)).scalar_one())


def test_submit_stores_a_pending_job_with_its_submit_row(queue: JobQueue) -> None:
    job_id = queue.submit(GenerationParams("  a cat  ", seed=42))
    job = queue.get(job_id)
    assert (job.status, job.version, job.attempt, job.prompt, job.seed) == (
        "PENDING",
        0,
        1,
        "a cat",
        42,
    )
    [row] = queue.timeline(job_id)
    assert (row.from_status, row.to_status, row.event, row.source) == (
        None,
        "PENDING",
        "SUBMIT",
        "user",
    )


def test_a_random_seed_is_fixed_at_submit(queue: JobQueue) -> None:
    job = queue.get(queue.submit(GenerationParams("a cat", seed=-1)))
    assert 0 <= job.seed < 2**32


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"prompt": "   "}, "the prompt is empty"),
        ({"width": 100}, "width 100 is not a multiple of 8"),
        ({"height": 4096}, "height must be between 32 and 2048, not 4096"),
        ({"steps": 0}, "steps must be between 1 and 150, not 0"),
        ({"cfg": 31.0}, "CFG must be between 0 and 30, not 31"),
        ({"scheduler": "Heun++"}, "unknown scheduler 'Heun++'"),
        ({"seed": -5}, "seed must be -1 (random) or between 0 and"),
    ],
)
def test_bad_parameters_are_refused_before_anything_is_stored(
    queue: JobQueue, changes: dict[str, object], message: str
) -> None:
    params = GenerationParams(**{"prompt": "ok", **changes})  # type: ignore[arg-type]
    with pytest.raises(InvalidParameters, match=re.escape(message)):
        queue.submit(params)
    assert queue.jobs() == []
    assert history_count(queue) == 0


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(InvalidParameters) as error:
        GenerationParams("", width=7, steps=500).validated()
    assert str(error.value).count(";") == 2


def test_fire_moves_the_row_and_writes_one_history_row(queue: JobQueue) -> None:
    job_id = queue.submit(PARAMS)
    record = queue.fire(job_id, E.PAUSE, source="test", message="hold it")
    assert (record.from_status, record.to_status, record.changed) == (S.PENDING, S.PAUSED, True)
    job = queue.get(job_id)
    assert (job.status, job.version) == ("PAUSED", 1)
    last = queue.timeline(job_id)[-1]
    assert (last.from_status, last.to_status, last.event, last.source, last.message) == (
        "PENDING", "PAUSED", "PAUSE", "test", "hold it",
    )  # fmt: skip


def test_a_refused_event_names_job_status_and_event_and_changes_nothing(queue: JobQueue) -> None:
    job_id = queue.submit(PARAMS)
    with pytest.raises(TransitionNotAllowed, match=f"Can't COMPLETE job {job_id} in PENDING"):
        queue.fire(job_id, E.COMPLETE, source="test")
    assert queue.get(job_id).version == 0
    assert len(queue.timeline(job_id)) == 1


@pytest.mark.parametrize("event", [E.CANCEL, E.PAUSE])
def test_repeating_a_satisfied_request_is_a_quiet_no_op(queue: JobQueue, event: JobEvent) -> None:
    job_id = queue.submit(PARAMS)
    queue.claim("w1")
    first = queue.fire(job_id, event, source="user")
    again = queue.fire(job_id, event, source="user")
    assert first.changed and not again.changed
    assert again.to_status == first.to_status
    assert len(queue.timeline(job_id)) == 3  # SUBMIT, START, and one request


def test_cancel_on_a_cancelled_job_is_a_no_op(queue: JobQueue) -> None:
    job_id = queue.submit(PARAMS)
    queue.cancel(job_id)
    assert not queue.cancel(job_id).changed
    assert queue.get(job_id).version == 1


def test_unknown_job(queue: JobQueue) -> None:
    with pytest.raises(JobNotFound, match="There is no job 99"):
        queue.cancel(99)
    with pytest.raises(JobNotFound):
        queue.timeline(99)


def test_a_lost_race_is_decided_again_on_fresh_state(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker read PROCESSING, but the user's cancel landed first: COMPLETE still wins."""
    job_id = queue.submit(PARAMS)
    queue.claim("w1")
    stale = queue_module._Snapshot(S.PROCESSING, 1, 1, "w1", 0.0)
    queue.cancel(job_id)  # now CANCELLING, version 2
    real_snapshot = JobQueue._snapshot
    calls = iter([stale])
    monkeypatch.setattr(
        JobQueue,
        "_snapshot",
        lambda self, tx, jid: next(calls, None) or real_snapshot(self, tx, jid),
    )
    record = queue.fire(job_id, E.COMPLETE, source="worker", worker_id="w1")
    assert (record.from_status, record.to_status) == (S.CANCELLING, S.SUCCESS)
    assert [t.to_status for t in queue.timeline(job_id)] == [
        "PENDING", "PROCESSING", "CANCELLING", "SUCCESS",
    ]  # fmt: skip


def test_a_worker_cannot_settle_a_job_it_no_longer_holds(queue: JobQueue) -> None:
    job_id = queue.submit(PARAMS)
    queue.claim("w1")
    queue.fire(job_id, E.TIMEOUT, source="watchdog")
    queue.retry(job_id, source="retry-policy")
    queue.claim("w2")
    with pytest.raises(NotHoldingJob, match="held by w2, not by w1"):
        queue.fire(job_id, E.COMPLETE, source="worker", worker_id="w1")
    assert not queue.heartbeat(job_id, "w1")
    assert queue.heartbeat(job_id, "w2")


def test_only_from_guards_a_decision_made_on_old_information(queue: JobQueue) -> None:
    job_id = queue.submit(PARAMS)
    queue.claim("w1")
    queue.cancel(job_id)
    with pytest.raises(TransitionNotAllowed):
        queue.fire(job_id, E.TIMEOUT, source="watchdog", only_from=[S.PROCESSING])
    assert queue.get(job_id).status == "CANCELLING"


def test_claim_takes_priority_then_age_and_respects_backoff(queue: JobQueue) -> None:
    now = 1_000.0
    queue.clock = lambda: now
    old = queue.submit(PARAMS)
    urgent = queue.submit(PARAMS, priority=5)
    waiting = queue.submit(PARAMS, priority=9)
    queue.claim("w0")
    queue.fire(waiting, E.FAIL, source="worker")
    queue.retry(waiting, source="retry-policy", not_before=now + 10)
    claimed = [queue.claim("w1"), queue.claim("w2"), queue.claim("w3")]
    assert [job.id if job else None for job in claimed] == [urgent, old, None]
    now += 11
    later = queue.claim("w4")
    assert later is not None and later.id == waiting and later.attempt == 2


def test_claim_records_the_start_and_the_worker(queue: JobQueue) -> None:
    job_id = queue.submit(PARAMS)
    job = queue.claim("host:1:abc")
    assert job is not None
    assert (job.id, job.status, job.worker_id, job.version) == (
        job_id,
        "PROCESSING",
        "host:1:abc",
        1,
    )
    assert job.heartbeat_at is not None
    start = queue.timeline(job_id)[-1]
    assert (start.event, start.source, start.message) == (
        "START",
        "worker",
        "claimed by host:1:abc",
    )


def test_progress_is_not_a_transition(queue: JobQueue) -> None:
    job_id = queue.submit(PARAMS)
    queue.claim("w1")
    assert queue.report_progress(job_id, "w1", 3, 4)
    job = queue.get(job_id)
    assert (job.progress_step, job.progress_total, job.version) == (3, 4, 1)
    assert len(queue.timeline(job_id)) == 2


def test_retry_counts_attempts_and_clears_given_up(queue: JobQueue) -> None:
    job_id = queue.submit(PARAMS, max_attempts=1)
    queue.claim("w1")
    queue.fire(job_id, E.FAIL, source="worker", changes={"error": "boom"})
    queue.mark_given_up(job_id, "failed 1 of 1 attempts: boom")
    assert queue.get(job_id).given_up
    record = queue.retry(job_id)
    job = queue.get(job_id)
    assert (record.attempt, job.attempt, job.given_up, job.status) == (2, 2, False, "PENDING")


def test_rerun_makes_a_new_job_that_points_back(queue: JobQueue) -> None:
    job_id = queue.submit(GenerationParams("a cat", seed=7))
    with pytest.raises(RequestRefused, match="only finished or cancelled"):
        queue.rerun(job_id)
    queue.cancel(job_id)
    new_id = queue.rerun(job_id)
    new = queue.get(new_id)
    assert (new.rerun_of, new.seed, new.status, new.prompt) == (job_id, 7, "PENDING", "a cat")
    assert queue.timeline(new_id)[0].message == f"re-run of job {job_id}"


def test_jobs_pages_newest_first_with_a_status_filter(queue: JobQueue) -> None:
    ids = [queue.submit(PARAMS) for _ in range(5)]
    queue.cancel(ids[1])
    assert [j.id for j in queue.jobs(limit=2)] == [ids[4], ids[3]]
    assert [j.id for j in queue.jobs(limit=2, before_id=ids[3])] == [ids[2], ids[1]]
    assert [j.id for j in queue.jobs([S.CANCELLED])] == [ids[1]]
    assert queue.count_by_status() == {S.PENDING: 4, S.CANCELLED: 1}


def test_a_failing_listener_never_blocks_a_transition(queue: JobQueue) -> None:
    seen: list[TransitionRecord] = []

    def broken(record: TransitionRecord) -> None:
        raise OSError("disk full")

    queue.listeners += [broken, seen.append]
    job_id = queue.submit(PARAMS)
    queue.cancel(job_id)
    assert queue.get(job_id).status == "CANCELLED"
    assert [r.to_status for r in seen] == [S.PENDING, S.CANCELLED]


def test_a_paused_jobs_checkpoint_is_removed_once_it_is_cancelled(tmp_path: Path) -> None:
    queue = open_queue(tmp_path / "q.db")
    checkpoint = tmp_path / "job.ckpt"
    checkpoint.write_bytes(b"latents")
    job_id = queue.submit(PARAMS)
    queue.claim("w1")
    queue.pause(job_id)
    queue.fire(job_id, E.STOPPED, source="worker", worker_id="w1",
               changes={"checkpoint_path": str(checkpoint)})  # fmt: skip
    assert checkpoint.exists()
    assert queue.checkpoint_path_of(job_id) == str(checkpoint)  # what the cleaner reads
    assert queue.checkpoint_path_of(job_id + 1) is None  # no such job: nothing to clean
    queue.cancel(job_id)
    assert not checkpoint.exists()
    queue.db.dispose()


@pytest.mark.parametrize("models", [(), ("m",)], ids=["plain claim", "model-aware claim"])
def test_a_machine_whose_clock_reads_earlier_never_stamps_a_job_back_in_time(
    db: Database, models: tuple[str, ...]
) -> None:
    """Two processes' estimates of the database server's time can disagree by a round trip:
    the one behind still stamps each change at or after the job's last one."""
    ahead = JobQueue(db, clock=lambda: 1000.0)
    behind = JobQueue(db, clock=lambda: 999.5)
    job_id = ahead.submit(GenerationParams(prompt="a kite", model="m"))
    claimed = behind.claim("box:1", models=models)
    assert claimed is not None and claimed.id == job_id
    ahead_again = JobQueue(db, clock=lambda: 1000.25)
    ahead_again.fire(job_id, JobEvent.PAUSE, source="test")
    behind.fire(job_id, JobEvent.STOPPED, source="worker")
    times = [row.at for row in behind.timeline(job_id)]
    assert times == [1000.0, 1000.0, 1000.25, 1000.25]
