"""Issue 21 item 2: a step stuck while the heartbeat thread lives.

The rule itself first (a fake clock is enough: it is arithmetic), then real worker
processes running the scripted runner's `hang@N` (a step that never returns): under the
window's supervisor, and under the headless worker (`python -m app worker`'s
`run_headless`) in a process of its own, where a stuck step and a cancel of a job whose
worker does not answer must both be settled and the worker replaced.
"""

from __future__ import annotations

import multiprocessing
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.settings import InvalidSettings, Settings
from app.engine.store.opening import open_queue
from app.engine.workers.headless import run_headless
from app.engine.workers.stall import StallRule, StepTimer
from app.engine.workers.worker import WorkerConfig
from tests.engine.workers.worker_fixtures import (
    FAST_POLICY,
    FAST_SETTINGS,
    WAIT_S,
    Harness,
    fake_params,
    worker_config,
)

S = JobStatus
STEP_S = 0.05
# The goal: a stuck step is noticed within 3 steps + the heartbeat timeout.
GOAL_S = 3 * STEP_S + FAST_SETTINGS.heartbeat_timeout_s
STUCK = re.compile(r"^stuck: no step finished for [\d.]+ s; a step takes about 0\.\d+ s$")


# --- the rule -------------------------------------------------------------------------------


def timer_with_steps(step_s: float, steps: int, total: int = 20) -> StepTimer:
    timer = StepTimer(started_at=0.0)
    for step in range(1, steps + 1):
        timer.record(10.0 + step * step_s, step, total)  # loading took 10 s
    return timer


def test_a_step_is_stuck_after_three_times_its_usual_time() -> None:
    rule = StallRule(limit_s=300.0, floor_s=1.0)
    timer = timer_with_steps(2.0, steps=4)  # the last step ended at 18 s
    assert timer.step_s == pytest.approx(2.0)
    assert rule.verdict(timer, now=18.0 + 5.9) is None
    assert rule.verdict(timer, now=18.0 + 42.0) == (
        "no step finished for 42 s; a step takes about 2 s"
    )


def test_never_stuck_within_the_floor_however_short_a_step() -> None:
    rule = StallRule(limit_s=300.0, floor_s=1.0)
    timer = timer_with_steps(0.01, steps=4)
    assert rule.verdict(timer, now=10.04 + 0.9) is None
    assert rule.verdict(timer, now=10.04 + 1.2) is not None


def test_before_two_steps_the_eta_says_how_long_a_step_takes() -> None:
    timer = timer_with_steps(2.0, steps=1)
    assert timer.step_s is None  # the first step also carried the loading
    assert StallRule(limit_s=300.0).verdict(timer, now=12.0 + 60.0) is None
    with_eta = StallRule(limit_s=300.0, expected_step_s=2.0)
    assert with_eta.verdict(timer, now=12.0 + 7.0) == (
        "no step finished for 7 s; a step takes about 2 s"
    )


def test_loading_and_decoding_get_the_setting_not_the_steps() -> None:
    rule = StallRule(limit_s=300.0, expected_step_s=0.5)
    loading = StepTimer(started_at=0.0)
    assert rule.verdict(loading, now=299.0) is None
    assert rule.verdict(loading, now=301.0) == (
        "no step finished 301 s after the claim (limit 300 s)"
    )
    decoding = timer_with_steps(0.5, steps=20, total=20)  # last step at 20 s
    assert rule.verdict(decoding, now=20.0 + 299.0) is None
    assert "image was not written 301 s after the last step" in (
        rule.verdict(decoding, now=20.0 + 301.0) or ""
    )


def test_a_stopped_process_is_excused_its_gap() -> None:
    rule = StallRule(limit_s=300.0, floor_s=1.0)
    timer = timer_with_steps(0.1, steps=4)
    timer.excuse(60.0)  # SIGSTOP for a minute: the step loop was stopped too
    assert rule.verdict(timer, now=10.4 + 60.2) is None


def test_the_stall_limit_is_a_validated_setting() -> None:
    assert Settings().stall_limit_s == 300.0
    assert Settings(stall_limit_s=60.0).validated().stall_limit_s == 60.0
    for wrong in (0.0, 5.0, 7200.0):
        with pytest.raises(InvalidSettings, match="stall limit must be between 10 and 3600"):
            Settings(stall_limit_s=wrong).validated()


def test_the_workers_take_the_limit_from_the_settings() -> None:
    config = WorkerConfig.from_settings(Settings(stall_limit_s=45.0), "jobs.db")
    assert config.stall_limit_s == 45.0


# --- real workers under the window's supervisor ---------------------------------------------


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(queue, tmp_path / "home")
    try:
        yield harness
    finally:
        for supervisor in harness.supervisors:
            supervisor.shutdown(timeout=5, pause_running=False)


def seen_at_step(h: Harness, job_id: int, step: int) -> float:
    h.wait_for(lambda: h.queue.get(job_id).progress_step >= step, what=f"step {step}")
    return time.monotonic()


def test_a_stuck_step_is_settled_within_three_steps_and_the_worker_replaced(
    h: Harness, queue: JobQueue
) -> None:
    supervisor = h.supervisor()
    supervisor.start()
    stuck = queue.submit(fake_params(f"step={STEP_S} hang@4", steps=20), max_attempts=1)
    behind = queue.submit(fake_params(steps=2))
    last_step_at = seen_at_step(h, stuck, 3)
    [pid] = supervisor.worker_pids()

    job = h.wait_status(stuck, S.TIMEOUT)
    noticed_s = time.monotonic() - last_step_at

    assert noticed_s <= GOAL_S, f"noticed after {noticed_s:.2f}s (goal {GOAL_S:.2f}s)"
    row = queue.timeline(stuck)[-1]
    assert (row.event, row.source) == ("TIMEOUT", "worker")
    assert STUCK.match(row.message), row.message
    assert h.wait_settled(behind).status == S.SUCCESS  # the queue does not sit behind it
    assert supervisor.worker_pids() != [pid]
    assert job.attempt == 1


def test_before_a_second_step_the_eta_judges_the_step(h: Harness, queue: JobQueue) -> None:
    supervisor = h.supervisor()
    supervisor.start()
    learned_from = queue.submit(fake_params(f"step={STEP_S}", steps=10))
    assert h.wait_settled(learned_from).status == S.SUCCESS  # the ETA now knows a step's time
    # Stuck after one step: this run has no step time of its own yet (the setting: 300 s).
    stuck = queue.submit(fake_params(f"step={STEP_S} hang@2", steps=10), max_attempts=1)
    h.wait_status(stuck, S.TIMEOUT, timeout=GOAL_S + 5)
    assert STUCK.match(queue.timeline(stuck)[-1].message)


# --- the headless worker, a process of its own ----------------------------------------------


def headless_main(location: str, config: WorkerConfig, settings: Settings) -> None:
    """What `python -m app worker` runs, with the scripted runner: the test's process."""
    queue = open_queue(location)
    try:
        run_headless(queue, config, settings, policy=FAST_POLICY)
    finally:
        queue.db.dispose()


@pytest.fixture
def headless(queue: JobQueue, tmp_path: Path) -> Iterator[BaseProcess]:
    config = replace(worker_config(queue, tmp_path / "home"), idle_poll_s=0.05)
    # Not a daemon: a daemon process may not start worker processes of its own.
    process = multiprocessing.get_context("spawn").Process(
        target=headless_main, args=(queue.db.location, config, FAST_SETTINGS)
    )
    process.start()
    yield process
    process.terminate()  # SIGTERM: the way a service manager stops it
    process.join(WAIT_S)
    if process.is_alive():
        process.kill()
        process.join(5)
    assert process.exitcode == 0


def wait_until(queue: JobQueue, job_id: int, *statuses: JobStatus, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while queue.get(job_id).status not in statuses:
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} is {queue.get(job_id).status}, not {statuses}")
        time.sleep(0.02)


def holder(queue: JobQueue, job_id: int) -> str:
    deadline = time.monotonic() + WAIT_S
    while queue.get(job_id).progress_step < 2:
        assert time.monotonic() < deadline, "the job never reached step 2"
        time.sleep(0.02)
    return queue.get(job_id).worker_id or ""


def test_a_headless_worker_stuck_in_a_step_is_replaced(
    queue: JobQueue, headless: BaseProcess
) -> None:
    stuck = queue.submit(fake_params(f"step={STEP_S} hang@4", steps=20), max_attempts=1)
    behind = queue.submit(fake_params(steps=2))
    stuck_worker = holder(queue, stuck)

    wait_until(queue, stuck, S.TIMEOUT, timeout=GOAL_S + 5)
    wait_until(queue, behind, S.SUCCESS)

    assert STUCK.match(queue.timeline(stuck)[-1].message)
    assert queue.get(behind).worker_id != stuck_worker  # a fresh worker took its place
    assert headless.is_alive()


def test_a_cancel_of_a_hung_headless_job_settles_within_the_grace_period(
    queue: JobQueue, headless: BaseProcess
) -> None:
    # Slow steps: the cancel's grace period runs out before the stall rule would act.
    hung = queue.submit(fake_params("step=0.5 hang@3", steps=20))
    hung_worker = holder(queue, hung)
    cancelled_at = time.monotonic()
    queue.cancel(hung)

    wait_until(queue, hung, S.CANCELLED, timeout=FAST_SETTINGS.cancel_grace_s + 5)
    settled_s = time.monotonic() - cancelled_at

    assert settled_s <= FAST_SETTINGS.cancel_grace_s + 1.5, f"settled after {settled_s:.1f}s"
    assert [row.event for row in queue.timeline(hung)][-2:] == ["CANCEL", "TIMEOUT"]
    after = queue.submit(fake_params(steps=2))
    wait_until(queue, after, S.SUCCESS)
    assert queue.get(after).worker_id != hung_worker  # the hung worker was replaced
