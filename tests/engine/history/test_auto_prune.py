"""Pruning by itself from the settings: a headless worker's maintenance prunes at its first
pass and then periodically, reading the settings again each time; both stores."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.engine.history.auto_prune import Pruned, PruneSchedule, prune_by_settings
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy
from app.engine.settings import Settings
from app.engine.workers.maintenance import Maintenance
from app.models.db import Database
from tests.engine.history.conftest import old_and_kept_jobs

LONG_AGO = 1_000.0
A_MONTH = Settings(keep_finished_days=30)
WAIT_S = 30.0


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert condition(), condition.__doc__


def left(queue: JobQueue) -> set[int]:
    return {job.id or 0 for job in queue.jobs(limit=None)}


@pytest.mark.both_backends
def test_a_headless_worker_prunes_periodically_as_the_settings_now_say(db: Database) -> None:
    queue = JobQueue(db)
    old = JobQueue(db, clock=lambda: LONG_AGO)
    first, keepers = old_and_kept_jobs(old, 3)
    kept = set(keepers.values())
    settings = [Settings()]  # keep everything, until the user changes it below
    maintenance = Maintenance(
        queue, heartbeat_timeout_s=0.1, policy=RetryPolicy(), settings=lambda: settings[0],
        prune_every_s=0.05,
    )  # fmt: skip
    with maintenance:
        time.sleep(0.3)  # several passes that must remove nothing
        assert set(first) <= left(queue)
        settings[0] = A_MONTH  # saved in the Settings window of some machine: no restart
        wait_until(lambda: left(queue) == kept)
        [later] = old.submit_many([GenerationParams("finished long ago, found later")])
        old.cancel(later)
        wait_until(lambda: later not in left(queue))  # a later pass took it too
    assert left(queue) == kept
    assert queue.get(keepers["failed"]).status == "PENDING"  # retried by the policy, not pruned


def test_prune_by_settings_keeps_images_unless_asked_and_logs_what_went(
    tmp_path: Path, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    old = JobQueue(db, clock=lambda: LONG_AGO)
    images = []
    for name in ("a", "b"):
        [job_id] = old.submit_many([GenerationParams(name)])
        old.cancel(job_id)
        images.append(tmp_path / f"{name}.png")
        images[-1].write_bytes(b"x" * 2_000_000)
        with db.write() as conn:  # fixture: the image it had made before
            conn.exec_driver_sql(
                "UPDATE job SET output_path = ? WHERE id = ?", (str(images[-1]), job_id)
            )
    assert prune_by_settings(old, Settings()) is None  # the default keeps everything
    pruned = prune_by_settings(JobQueue(db), Settings(keep_finished_jobs=1))
    assert pruned == Pruned(removed=1, freed_bytes=pruned.freed_bytes if pruned else -1,
                            days=0, keep=1)  # fmt: skip
    assert images[0].exists()  # its job is gone, its image stays: nobody asked
    caplog.set_level(logging.INFO, logger="app.engine.history.auto_prune")
    pruned = prune_by_settings(JobQueue(db), Settings(keep_finished_days=1, prune_images=True))
    assert pruned is not None and pruned.removed == 1 and pruned.freed_bytes >= 2_000_000
    assert not images[1].exists() and images[0].exists()
    assert pruned.line().startswith("Removed 1 finished job older than 1 day; freed ")
    assert f"automatic prune: {pruned.line()}" in caplog.messages


def test_the_schedule_is_due_at_once_then_after_each_interval() -> None:
    clock = [100.0]
    schedule = PruneSchedule(3600, clock=lambda: clock[0])
    assert schedule.due()
    schedule.ran()
    clock[0] += 3599
    assert not schedule.due()
    clock[0] += 1
    assert schedule.due()
