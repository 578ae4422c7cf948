"""The chaos checks on hand-made bad timelines and ledgers: each must count its fault.

The good cases come from a real queue on a real SQLite file, so the checks accept exactly
what the engine writes; the bad cases are that history tampered with in one place.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

from app.engine.jobs.graph import parents_of
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, params_of
from app.engine.jobs.states import JobEvent, JobStatus
from app.models.tables import Job, JobTransition
from app.testing.ledger import LedgerEntry, Mark, job_key
from benchmarks.chaos_checks import (
    FAULT_FIGURES,
    EmptyLedger,
    Timing,
    completed_twice,
    fault_figures,
    figures,
    garbage_images,
    image_difference,
    is_lost,
    is_one_colour,
    is_stuck,
    legal,
    overlapping_runs,
    overwritten_images,
    percentile,
    resumed_after_crash_diffs,
    seconds_lost_per_kill,
    stall_detections,
    steps_lost_per_kill,
    steps_per_interval,
    unrecorded_successes,
)

E, S = JobEvent, JobStatus


def finished_job(queue: JobQueue, tmp_path: Path) -> int:
    """SUBMIT, START, COMPLETE through the real queue, with an image file on disk."""
    job_id = queue.submit(GenerationParams("a cat", model="fake", steps=4), source="test")
    queue.claim("w1")
    image = tmp_path / f"{job_id:06d}.png"
    image.write_bytes(b"png")
    queue.fire(job_id, E.COMPLETE, source="worker", changes={"output_path": str(image)})
    return job_id


def row(timeline: list[JobTransition], index: int, **changes: object) -> list[JobTransition]:
    """The timeline with one row changed (a copy: the originals stay as the queue wrote them)."""
    changed = list(timeline)
    changed[index] = changed[index].model_copy(update=changes)
    return changed


def no_reference(job: Job) -> Path:
    raise AssertionError(f"job {job.id} was not interrupted: it needs no reference image")


def entry(job: int, run: str, what: Mark, at: float) -> LedgerEntry:
    return LedgerEntry(job, run, what, at)


# --- legal -------------------------------------------------------------------------------------


def test_a_timeline_the_queue_wrote_is_legal(queue: JobQueue, tmp_path: Path) -> None:
    job_id = finished_job(queue, tmp_path)
    assert [t.event for t in queue.timeline(job_id)] == [E.SUBMIT, E.START, E.COMPLETE]
    assert legal(queue.timeline(job_id))


def test_an_event_the_table_does_not_allow_is_illegal(queue: JobQueue, tmp_path: Path) -> None:
    timeline = queue.timeline(finished_job(queue, tmp_path))
    # PROCESSING --RESUME--> SUCCESS: the statuses chain, but the table has no such edge.
    assert not legal(row(timeline, 2, event=E.RESUME))


def test_a_wrong_destination_is_illegal(queue: JobQueue, tmp_path: Path) -> None:
    timeline = queue.timeline(finished_job(queue, tmp_path))
    assert not legal(row(timeline, 2, to_status=S.CANCELLED))  # COMPLETE leads to SUCCESS


def test_a_jump_between_rows_is_illegal(queue: JobQueue, tmp_path: Path) -> None:
    timeline = queue.timeline(finished_job(queue, tmp_path))
    # Both rows are allowed on their own, but the walk skips from PROCESSING to PAUSING.
    jumped = row(timeline, 2, from_status=S.PAUSING, event=E.COMPLETE)
    assert not legal(jumped)


def test_a_timeline_must_start_with_submit(queue: JobQueue, tmp_path: Path) -> None:
    timeline = queue.timeline(finished_job(queue, tmp_path))
    assert not legal(timeline[1:])
    assert not legal([])


def test_a_chained_job_starts_blocked_and_its_timeline_is_legal(
    queue: JobQueue, tmp_path: Path
) -> None:
    parent = finished_job(queue, tmp_path)
    child = queue.submit(GenerationParams("b", model="fake"), source="test", parents=[parent])
    queue.fire(child, E.UNBLOCK, source="graph")
    timeline = queue.timeline(child)
    assert [t.event for t in timeline] == [E.SUBMIT_AFTER, E.UNBLOCK]
    assert legal(timeline)
    # SUBMIT_AFTER leads to BLOCKED, never straight to PENDING.
    assert not legal(row(timeline, 0, to_status=S.PENDING))


# --- lost --------------------------------------------------------------------------------------


def test_a_finished_job_with_its_image_is_not_lost(queue: JobQueue, tmp_path: Path) -> None:
    job_id = finished_job(queue, tmp_path)
    assert not is_lost(queue.get(job_id), queue.timeline(job_id))


def test_a_missing_job_is_lost(queue: JobQueue, tmp_path: Path) -> None:
    job_id = finished_job(queue, tmp_path)
    assert is_lost(None, queue.timeline(job_id))


def test_a_job_whose_status_is_not_where_its_history_ends_is_lost(
    queue: JobQueue, tmp_path: Path
) -> None:
    job_id = finished_job(queue, tmp_path)
    timeline = queue.timeline(job_id)
    assert is_lost(queue.get(job_id), timeline[:-1])  # history stops at PROCESSING
    assert is_lost(queue.get(job_id), [])


def test_a_success_without_its_image_is_lost(queue: JobQueue, tmp_path: Path) -> None:
    job_id = finished_job(queue, tmp_path)
    Path(queue.get(job_id).output_path or "").unlink()
    assert is_lost(queue.get(job_id), queue.timeline(job_id))


# --- stuck -------------------------------------------------------------------------------------


def test_running_pending_and_retryable_jobs_are_stuck(queue: JobQueue) -> None:
    pending = queue.submit(GenerationParams("a", model="fake"), source="test")
    running = queue.submit(GenerationParams("b", model="fake"), source="test")
    failed = queue.submit(GenerationParams("c", model="fake"), source="test")
    queue.claim("w1", job_id=running)
    queue.claim("w1", job_id=failed)
    queue.fire(failed, E.FAIL, source="worker")
    assert [stuck(queue, job) for job in (pending, running, failed)] == [True] * 3


def test_finished_cancelled_and_given_up_jobs_are_not_stuck(
    queue: JobQueue, tmp_path: Path
) -> None:
    done = finished_job(queue, tmp_path)
    cancelled = queue.submit(GenerationParams("b", model="fake"), source="test")
    queue.cancel(cancelled)
    given_up = queue.submit(GenerationParams("c", model="fake"), source="test")
    queue.claim("w1", job_id=given_up)
    queue.fire(given_up, E.FAIL, source="worker")
    queue.mark_given_up(given_up, "test")
    assert [stuck(queue, job) for job in (done, cancelled, given_up)] == [False] * 3


def stuck(queue: JobQueue, job_id: int) -> bool:
    """`is_stuck` on the queue as it is now, with the parents the database holds."""
    jobs = {job.id or 0: job for job in queue.jobs()}
    return is_stuck(jobs[job_id], jobs, {job: parents_of(queue, job) for job in jobs})


def given_up_job(queue: JobQueue) -> int:
    job_id = queue.submit(GenerationParams("given up", model="fake"), source="test")
    queue.claim("w1", job_id=job_id)
    queue.fire(job_id, E.FAIL, source="worker")
    queue.mark_given_up(job_id, "test")
    return job_id


def after(queue: JobQueue, *parents: int) -> int:
    return queue.submit(GenerationParams("child", model="fake"), source="test", parents=parents)


def test_a_child_waiting_for_a_parent_that_will_still_run_is_stuck(queue: JobQueue) -> None:
    pending = queue.submit(GenerationParams("a", model="fake"), source="test")
    failed = queue.submit(GenerationParams("b", model="fake"), source="test")
    queue.claim("w1", job_id=failed)
    queue.fire(failed, E.FAIL, source="worker")  # not given up: the policy will retry it
    assert stuck(queue, after(queue, pending))
    assert stuck(queue, after(queue, failed))


def test_children_of_a_given_up_parent_are_settled_down_the_chain(queue: JobQueue) -> None:
    # The graph leaves them BLOCKED with a reason (docs/architecture.md, *The job graph*):
    # only a user's retry helps.
    child = after(queue, given_up_job(queue))
    grandchild = after(queue, child)
    assert [stuck(queue, job) for job in (child, grandchild)] == [False, False]
    assert queue.get(grandchild).status == S.BLOCKED


def test_a_child_is_settled_when_any_of_its_parents_was_given_up(queue: JobQueue) -> None:
    pending = queue.submit(GenerationParams("a", model="fake"), source="test")
    assert not stuck(queue, after(queue, pending, given_up_job(queue)))


def test_a_blocked_child_of_a_cancelled_parent_is_stuck(queue: JobQueue) -> None:
    # This bare queue has no graph listener, so the cascade cancel never came: the child
    # is stranded, and the drain must wait for reconciliation rather than call it settled.
    parent = queue.submit(GenerationParams("a", model="fake"), source="test")
    child = after(queue, parent)
    queue.cancel(parent)
    assert queue.get(child).status == S.BLOCKED
    assert stuck(queue, child)


# --- double runs -------------------------------------------------------------------------------


def test_two_runs_one_after_the_other_do_not_overlap() -> None:
    ledger = [
        entry(1, "a", Mark.START, 1.0), entry(1, "a", Mark.STEP, 2.0),
        entry(1, "a", Mark.PAUSED, 3.0),
        entry(1, "b", Mark.START, 4.0), entry(1, "b", Mark.COMPLETED, 5.0),
        entry(2, "c", Mark.START, 2.5), entry(2, "c", Mark.COMPLETED, 3.5),
    ]  # fmt: skip
    assert overlapping_runs(ledger) == set()


def test_two_runs_of_one_job_at_the_same_time_overlap() -> None:
    ledger = [
        entry(1, "a", Mark.START, 1.0), entry(1, "b", Mark.START, 2.0),
        entry(1, "a", Mark.STEP, 3.0), entry(1, "b", Mark.COMPLETED, 4.0),
        entry(2, "c", Mark.START, 1.0), entry(2, "c", Mark.COMPLETED, 5.0),
    ]  # fmt: skip
    assert overlapping_runs(ledger) == {1}


def test_a_killed_run_overlapping_its_retry_counts_though_it_never_ended() -> None:
    # Run "a" was killed without an end mark, but its last step came after "b" started.
    ledger = [
        entry(3, "a", Mark.START, 1.0), entry(3, "b", Mark.START, 2.0),
        entry(3, "a", Mark.STEP, 2.5), entry(3, "b", Mark.COMPLETED, 6.0),
    ]  # fmt: skip
    assert overlapping_runs(ledger) == {3}


def test_a_job_completed_twice_is_a_double_run(queue: JobQueue, tmp_path: Path) -> None:
    timeline = queue.timeline(finished_job(queue, tmp_path))
    assert not completed_twice(timeline)
    assert completed_twice([*timeline, timeline[-1]])


def test_a_success_the_ledger_never_saw_is_unrecorded(queue: JobQueue, tmp_path: Path) -> None:
    seen, unseen = finished_job(queue, tmp_path), finished_job(queue, tmp_path)
    jobs = [queue.get(seen), queue.get(unseen)]
    ledger = [entry(seen, "a", Mark.START, 1.0), entry(seen, "a", Mark.COMPLETED, 2.0)]
    assert unrecorded_successes(jobs, ledger) == {unseen}
    # A run that was only started (then killed) does not count as having made the image.
    assert unrecorded_successes(jobs, ledger[:1]) == {seen, unseen}


# --- the figures -------------------------------------------------------------------------------


def test_figures_count_each_fault_once(queue: JobQueue, tmp_path: Path) -> None:
    good, overlapped, tampered = (finished_job(queue, tmp_path) for _ in range(3))
    missing = 999  # submitted, but not in the table
    jobs: dict[int, Job] = {job.id or 0: job for job in queue.jobs()}
    timelines = {job_id: queue.timeline(job_id) for job_id in jobs}
    timelines[tampered] = row(timelines[tampered], 2, event=E.RESUME)
    ledger = [entry(j, f"run{j}", Mark.COMPLETED, float(j)) for j in (good, overlapped, tampered)]
    ledger += [entry(overlapped, "late", Mark.START, 0.0), entry(overlapped, "late", Mark.STEP, 9)]

    submitted = [good, overlapped, tampered, missing]
    result = figures(submitted, jobs, timelines, ledger, tmp_path, no_reference, parents={})

    assert {name: result[name] for name in ("lost", "double_runs", "illegal_paths")} == {
        "lost": 1, "double_runs": 1, "illegal_paths": 2,  # the tampered one and the missing one
    }  # fmt: skip
    assert (result["jobs"], result["stuck"], result["unrecorded"], result["success"]) == (
        3, 0, 0, 3,
    )  # fmt: skip
    assert result["ledger_runs"] == 4
    assert (result["garbage_images"], result["resumed_after_crash_jobs"]) == (0, 0)


def test_an_empty_ledger_fails_instead_of_reading_as_no_double_runs(
    queue: JobQueue, tmp_path: Path
) -> None:
    job_id = finished_job(queue, tmp_path)
    jobs = {job_id: queue.get(job_id)}
    with pytest.raises(EmptyLedger, match="recorded no runs"):
        timelines = {job_id: queue.timeline(job_id)}
        figures([job_id], jobs, timelines, [], tmp_path / "ledger.jsonl", no_reference, {})


def test_a_ledger_entry_survives_its_line() -> None:
    original = entry(7, "abc", Mark.PAUSED, 12.5)
    assert LedgerEntry.parse(original.line()) == original


def test_a_chaos_run_whose_workers_wrote_no_ledger_fails(queue: JobQueue, tmp_path: Path) -> None:
    from benchmarks.chaos import check

    job_id = finished_job(queue, tmp_path)
    with pytest.raises(EmptyLedger, match="recorded no runs"):
        check(queue, [job_id], tmp_path / "ledger.jsonl", no_reference, {})  # never written


# --- steps lost and images (issues 10 and 11) --------------------------------------------------


def steps(job: int, run: str, numbers: range, start_at: float) -> list[LedgerEntry]:
    marks = [entry(job, run, Mark.START, start_at)]
    return marks + [
        LedgerEntry(job, run, Mark.STEP, start_at + i + 1, n) for i, n in enumerate(numbers)
    ]


def test_steps_lost_count_what_the_next_run_did_again_after_a_kill() -> None:
    killed = steps(1, "a", range(1, 8), 0.0)  # reached step 7, no end mark
    resumed = [*steps(1, "b", range(5, 11), 20.0), entry(1, "b", Mark.COMPLETED, 40.0)]
    assert steps_lost_per_kill(killed + resumed) == [3]  # steps 5, 6 and 7 again


def test_a_restart_from_scratch_loses_every_step_done() -> None:
    killed = steps(2, "a", range(1, 5), 0.0)
    again = steps(2, "b", range(1, 9), 10.0)
    assert steps_lost_per_kill(again + killed) == [4]  # order in the file does not matter


def test_seconds_lost_run_from_the_step_resumed_after_or_the_start() -> None:
    killed = steps(1, "a", range(1, 8), 0.0)  # start at 0 s, step n at n s
    resumed = steps(1, "b", range(5, 11), 20.0)  # resumed after step 4
    scratch = steps(2, "c", range(1, 5), 0.0)
    again = steps(2, "d", range(1, 9), 10.0)  # from the start again
    assert seconds_lost_per_kill(killed + resumed) == [3.0]  # step 4 (4 s) to step 7 (7 s)
    assert seconds_lost_per_kill(scratch + again) == [4.0]  # start (0 s) to step 4 (4 s)


def test_paused_runs_and_runs_killed_before_a_step_lose_nothing() -> None:
    paused = [*steps(3, "a", range(1, 5), 0.0), entry(3, "a", Mark.PAUSED, 5.0)]
    resumed = steps(3, "b", range(3, 9), 10.0)  # an odd resume, but the pause was clean
    unstarted = [entry(4, "c", Mark.START, 0.0)]
    retried = steps(4, "d", range(1, 3), 5.0)
    assert steps_lost_per_kill(paused + resumed + unstarted + retried) == []


def test_steps_per_interval_is_the_interval_over_the_median_step_time() -> None:
    one_second_steps = steps(1, "a", range(1, 6), 0.0)  # a step every second
    quick = [LedgerEntry(2, "b", Mark.STEP, 100 + 0.25 * n, n) for n in range(1, 12)]
    assert steps_per_interval(one_second_steps, 10.0) == 10
    assert steps_per_interval(quick, 10.0) == 40  # ten gaps of 0.25 s outnumber four of 1 s
    assert steps_per_interval(quick + one_second_steps, 10.0) == 40
    assert steps_per_interval([entry(3, "c", Mark.START, 0.0)], 10.0) == 0


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 95) == 0
    assert percentile([5, 1, 3], 50) == 3
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([0] * 19 + [40], 95) == 0  # one kill in twenty may lose more


def png(path: Path, pixels: list[tuple[int, int, int]]) -> Path:
    image = Image.new("RGB", (len(pixels), 1))
    image.putdata(pixels)
    image.save(path)
    return path


def test_one_colour_images_are_told_from_real_ones(tmp_path: Path) -> None:
    assert is_one_colour(png(tmp_path / "black.png", [(0, 0, 0)] * 4))
    assert not is_one_colour(png(tmp_path / "two.png", [(0, 0, 0), (0, 0, 1)]))
    (tmp_path / "scripted.png").write_bytes(b'{"prompt": "a cat"}')
    assert not is_one_colour(tmp_path / "scripted.png")


def test_image_difference_is_the_largest_channel_difference(tmp_path: Path) -> None:
    a = png(tmp_path / "a.png", [(10, 20, 30), (40, 50, 60)])
    b = png(tmp_path / "b.png", [(10, 20, 30), (40, 57, 60)])
    wide = png(tmp_path / "wide.png", [(10, 20, 30)] * 3)
    assert image_difference(a, a) == 0
    assert image_difference(a, b) == 7
    assert image_difference(a, wide) == 255
    (tmp_path / "x").write_bytes(b"one")
    (tmp_path / "y").write_bytes(b"two")
    assert image_difference(tmp_path / "x", tmp_path / "x") == 0
    assert image_difference(tmp_path / "x", tmp_path / "y") == 255


def succeed(queue: JobQueue, job_id: int, image: Path) -> None:
    queue.claim("w2", job_id=job_id)
    queue.fire(job_id, E.COMPLETE, source="worker", changes={"output_path": str(image)})


def lost_then_retried(queue: JobQueue, prompt: str) -> int:
    job_id = queue.submit(GenerationParams(prompt, model="fake"), source="test")
    queue.claim("w1", job_id=job_id)
    queue.fire(job_id, E.TIMEOUT, source="watchdog")
    queue.retry(job_id)
    return job_id


def test_garbage_images_are_one_colour_or_unlike_an_uninterrupted_run(
    queue: JobQueue, tmp_path: Path
) -> None:
    good = [(1, 2, 3), (4, 5, 6)]
    references = {prompt: png(tmp_path / f"ref-{prompt}.png", good) for prompt in "abcd"}
    black = lost_then_retried(queue, "a")
    succeed(queue, black, png(tmp_path / "a.png", [(0, 0, 0)] * 2))
    drifted = lost_then_retried(queue, "b")
    succeed(queue, drifted, png(tmp_path / "b.png", [(1, 2, 3), (4, 5, 9)]))
    faithful = lost_then_retried(queue, "c")
    succeed(queue, faithful, png(tmp_path / "c.png", good))
    once = queue.submit(GenerationParams("d", model="fake"), source="test")
    succeed(queue, once, png(tmp_path / "d.png", [(9, 9, 9), (1, 1, 1)]))  # is its own reference
    jobs = queue.jobs()
    timelines = {job.id or 0: queue.timeline(job.id or 0) for job in jobs}

    def reference(job: Job) -> Path:
        return references[job.prompt]

    assert garbage_images(jobs, timelines, reference) == {black, drifted}
    assert sorted(resumed_after_crash_diffs(jobs, timelines, reference)) == [0, 3, 6]


def test_a_chaos_run_counts_a_child_stranded_after_its_parent_succeeded(
    queue: JobQueue, tmp_path: Path
) -> None:
    from benchmarks.chaos import check

    parent = finished_job(queue, tmp_path)
    # This bare queue has no graph listener: the UNBLOCK after the parent's commit never
    # came, as if the process died between the two commits and nothing reconciled.
    child = after(queue, parent)
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(entry(parent, "a", Mark.COMPLETED, 1.0).line())

    result = check(queue, [parent, child], ledger, no_reference, {child: [parent]})

    assert (result["orphaned_children"], result["stuck"], result["blocked"]) == (1, 1, 1)
    assert (result["illegal_paths"], result["lost"]) == (0, 0)


# --- skewed clocks, stalls, outages, replaced databases (issue 21) -----------------------------

TIMING = Timing(heartbeat_timeout_s=3.0, heartbeat_interval_s=0.5)


def job_of(queue: JobQueue, prompt: str = "a cat") -> tuple[int, Job]:
    job_id = queue.submit(GenerationParams(prompt, model="fake", steps=40), source="test")
    return job_id, queue.get(job_id)


def keyed_run(
    job: Job, run: str, times: list[float], end: Mark | None, *, attempt: int = 1
) -> list[LedgerEntry]:
    """A run of `job` (its real key and image name) with a step at each of `times`."""
    start = LedgerEntry(
        job.id or 0, run, Mark.START, times[0] - 0.1, image=f"{job.id:06d}-{job.seed}.png",
        key=job_key(params_of(job)), attempt=attempt,
    )  # fmt: skip
    marks = [start] + [
        LedgerEntry(job.id or 0, run, Mark.STEP, at, n) for n, at in enumerate(times, 1)
    ]
    return marks + ([LedgerEntry(job.id or 0, run, end, times[-1] + 0.05)] if end else [])


def history(
    job_id: int, *rows: tuple[JobEvent, str, float], attempt: int = 1
) -> list[JobTransition]:
    """A hand-made timeline: SUBMIT, START, then `rows` of (event, source, at)."""
    made = [
        JobTransition(job_id=job_id, attempt=attempt, from_status=None, to_status=S.PENDING,
                      event=E.SUBMIT, source="test", at=0.0),
        JobTransition(job_id=job_id, attempt=attempt, from_status=S.PENDING,
                      to_status=S.PROCESSING, event=E.START, source="worker", at=0.5),
    ]  # fmt: skip
    for event, source, at in rows:
        made.append(JobTransition(
            job_id=job_id, attempt=attempt, from_status=S.PROCESSING, to_status=S.TIMEOUT,
            event=event, source=source, at=at,
        ))  # fmt: skip
    return made


def steady(start: float, end: float, every: float = 0.2) -> list[float]:
    return [round(start + every * n, 3) for n in range(int((end - start) / every) + 1)]


def test_a_steady_run_that_lost_its_job_to_a_timeout_is_a_healthy_job_timed_out(
    queue: JobQueue,
) -> None:
    job_id, job = job_of(queue)
    ledger = keyed_run(job, "a", steady(1.0, 20.0), Mark.LOST)
    timeline = history(job_id, (E.TIMEOUT, "worker watchdog", 19.9))
    result = fault_figures({job_id: job}, {job_id: timeline}, ledger, TIMING)
    assert (result["healthy_jobs_timed_out"], result["attempts_burned_by_outage"]) == (1, 0)
    # A run that finished its steps, its COMPLETE then refused, was just as healthy.
    finished = keyed_run(job, "a", steady(1.0, 20.0), Mark.COMPLETED)
    assert (
        fault_figures({job_id: job}, {job_id: timeline}, finished, TIMING)["healthy_jobs_timed_out"]
        == 1
    )


def test_a_worker_killed_between_its_image_and_its_settle_earns_the_timeout(
    queue: JobQueue,
) -> None:
    """Seen in CI: the run's last mark is its end (the image written), then the worker died
    before its COMPLETE, and the watchdog timed the job out a heartbeat timeout later."""
    job_id, job = job_of(queue)
    ledger = keyed_run(job, "a", steady(1.0, 5.0), Mark.COMPLETED)  # ends at 5.05
    late = history(job_id, (E.TIMEOUT, "watchdog", 5.05 + TIMING.silence_allowed_s + 0.5))
    result = fault_figures({job_id: job}, {job_id: late}, ledger, TIMING)
    assert result["healthy_jobs_timed_out"] == 0
    soon = history(job_id, (E.TIMEOUT, "watchdog", 5.2))  # no time to settle: not earned
    assert fault_figures({job_id: job}, {job_id: soon}, ledger, TIMING)["healthy_jobs_timed_out"]


def test_a_worker_the_driver_killed_right_after_its_image_earns_the_timeout(
    queue: JobQueue,
) -> None:
    """Seen at load 3: the run's last mark is its end (the image written), the driver
    SIGKILLed its worker before the SUCCESS was written, and the supervisor reported the
    worker gone 0.08 s later. Earned by the kill; the same TIMEOUT naming a worker nobody
    killed is not."""
    job_id, job = job_of(queue)
    ledger = keyed_run(job, "a", steady(1.0, 5.0), Mark.COMPLETED)  # ends at 5.05
    timeline = history(job_id, (E.TIMEOUT, "supervisor", 5.13))
    timeline[-1].message = "worker vm:4242:61db262fa516 exited (code -9)"
    killed = replace(TIMING, killed_workers=frozenset({"vm:4242:61db262fa516"}))
    result = fault_figures({job_id: job}, {job_id: timeline}, ledger, killed)
    assert result["healthy_jobs_timed_out"] == 0
    other = replace(TIMING, killed_workers=frozenset({"vm:4243:61db262fa516"}))
    assert fault_figures({job_id: job}, {job_id: timeline}, ledger, other)["healthy_jobs_timed_out"]


def test_killed_frozen_and_stalled_runs_earn_their_timeout(queue: JobQueue) -> None:
    jobs = dict(job_of(queue, prompt) for prompt in ("killed", "frozen", "stalled", "paused"))
    killed, frozen, stalled, paused = jobs
    ledger = [
        *keyed_run(jobs[killed], "k", steady(1.0, 5.0), None),  # silent from 5 s: SIGKILL
        *keyed_run(jobs[frozen], "f", [*steady(1.0, 5.0), 9.0, 9.2], Mark.LOST),  # 4 s frozen
        *keyed_run(jobs[stalled], "s", steady(1.0, 5.0), None),
        LedgerEntry(stalled, "s", Mark.STALLED, 5.01),
        LedgerEntry(stalled, "s", Mark.LOST, 5.5),  # noticed at once: earned all the same
        *keyed_run(jobs[paused], "p", steady(1.0, 5.0), Mark.PAUSED),  # never timed out
    ]
    timelines = {job_id: history(job_id, (E.TIMEOUT, "watchdog", 8.5)) for job_id in jobs}
    timelines[paused] = history(paused)
    result = fault_figures(jobs, timelines, ledger, TIMING)
    assert (result["healthy_jobs_timed_out"], result["attempts_burned_by_outage"]) == (0, 0)


def test_each_attempt_earns_its_own_timeout(queue: JobQueue) -> None:
    job_id, job = job_of(queue)
    ledger = [
        *keyed_run(job, "a", steady(1.0, 5.0), None, attempt=1),  # killed: earned
        *keyed_run(job, "b", steady(10.0, 14.0), Mark.LOST, attempt=2),  # healthy: not
    ]
    timeline = [
        *history(job_id, (E.TIMEOUT, "watchdog", 8.5)),
        *history(job_id, (E.TIMEOUT, "watchdog", 14.0), attempt=2)[1:],
    ]
    assert (
        fault_figures({job_id: job}, {job_id: timeline}, ledger, TIMING)["healthy_jobs_timed_out"]
        == 1
    )
    # An attempt the ledger never saw start (its worker died before) is not judged.
    bare = history(job_id, (E.TIMEOUT, "watchdog", 3.0), attempt=3)
    assert (
        fault_figures({job_id: job}, {job_id: bare}, ledger, TIMING)["healthy_jobs_timed_out"] == 0
    )


def test_a_job_timed_out_after_running_through_an_outage_burned_an_attempt(
    queue: JobQueue,
) -> None:
    job_id, job = job_of(queue)
    # Steps until the server went down at 5 s, none while it was down, on again at 13 s.
    ledger = keyed_run(job, "a", [*steady(1.0, 5.0), *steady(13.0, 15.0)], Mark.LOST)
    timeline = history(job_id, (E.TIMEOUT, "worker watchdog", 14.5))
    outage = Timing(3.0, 0.5, outages=[(5.0, 13.0)])
    result = fault_figures({job_id: job}, {job_id: timeline}, ledger, outage)
    assert (result["attempts_burned_by_outage"], result["healthy_jobs_timed_out"]) == (1, 0)
    # Without the outage on record, the same 8 s of silence would have earned the timeout.
    assert (
        fault_figures({job_id: job}, {job_id: timeline}, ledger, TIMING)[
            "attempts_burned_by_outage"
        ]
        == 0
    )


def test_a_claim_timed_out_just_after_an_outage_counts_as_burned_by_it(queue: JobQueue) -> None:
    job_id, job = job_of(queue)
    ledger = keyed_run(job, "a", steady(20.0, 21.0), Mark.LOST)  # ran after, then taken
    timeline = history(job_id, (E.TIMEOUT, "worker watchdog", 21.0))
    outage = Timing(3.0, 0.5, outages=[(5.0, 17.0)])
    result = fault_figures({job_id: job}, {job_id: timeline}, ledger, outage)
    assert (result["attempts_burned_by_outage"], result["healthy_jobs_timed_out"]) == (1, 0)


def test_an_image_completed_by_two_different_jobs_is_overwritten(queue: JobQueue) -> None:
    _, old = job_of(queue, "the old job 1")
    _, new = job_of(queue, "the new job 1")
    new = new.model_copy(update={"id": old.id, "seed": old.seed})  # a restored database
    same_name = [
        *keyed_run(old, "a", steady(1.0, 2.0), Mark.COMPLETED),
        *keyed_run(new, "b", steady(5.0, 6.0), Mark.COMPLETED),
    ]
    assert overwritten_images(same_name) == {f"{old.id:06d}-{old.seed}.png"}
    rerun = [*keyed_run(old, "a", steady(1.0, 2.0), Mark.COMPLETED),
             *keyed_run(old, "c", steady(5.0, 6.0), Mark.COMPLETED)]  # fmt: skip
    assert overwritten_images(rerun) == set()  # the same job again writes the same image
    unfinished = [*keyed_run(old, "a", steady(1.0, 2.0), Mark.COMPLETED),
                  *keyed_run(new, "b", steady(5.0, 6.0), None)]  # fmt: skip
    assert overwritten_images(unfinished) == set()
    # Two jobs of one id at the same time are two jobs, not a double run.
    at_once = [*keyed_run(old, "a", steady(1.0, 4.0), Mark.COMPLETED),
               *keyed_run(new, "b", steady(2.0, 5.0), Mark.COMPLETED)]  # fmt: skip
    assert overlapping_runs(at_once) == set()
    assert overlapping_runs([*at_once, *keyed_run(old, "c", steady(3.0, 4.0), None)]) == {old.id}


def test_a_stall_is_timed_from_its_step_to_the_first_move_not_by_its_worker(
    queue: JobQueue,
) -> None:
    job_id, job = job_of(queue)
    ledger = [
        *keyed_run(job, "a", steady(1.0, 10.0, every=0.5), None),
        LedgerEntry(job_id, "a", Mark.STALLED, 10.0),
        LedgerEntry(job_id, "a", Mark.STEP, 40.0, 20),  # lifted at 40 s: found the job taken
        LedgerEntry(job_id, "a", Mark.LOST, 40.0),
    ]
    # The worker's own rows after the stall began are no detection (here: a made-up one).
    progress = JobTransition(
        job_id=job_id, attempt=1, from_status=S.PROCESSING, to_status=S.PROCESSING,
        event=E.START, source="worker", at=11.0,
    )  # fmt: skip
    noticed = [*history(job_id, (E.TIMEOUT, "worker watchdog", 14.0)), progress]
    result = fault_figures({job_id: job}, {job_id: noticed}, ledger, TIMING)
    # goal: 3 steps of 0.5 s + the 3 s timeout
    assert (result["stall_detected_s"], result["stall_goal_s"]) == (4.0, 4.5)
    assert (result["stalls"], result["stalls_late"], result["healthy_jobs_timed_out"]) == (1, 0, 0)

    late = history(job_id, (E.TIMEOUT, "worker watchdog", 16.0))
    assert fault_figures({job_id: job}, {job_id: late}, ledger, TIMING)["stalls_late"] == 1

    never = history(job_id)  # lifted at 40 s with nobody having acted: 30 s, late
    result = fault_figures({job_id: job}, {job_id: never}, ledger, TIMING)
    assert (result["stall_detected_s"], result["stalls_late"]) == (30.0, 1)
    [detection] = stall_detections(ledger, {job_id: never}, 3.0)
    assert not detection.noticed


def test_the_new_figures_reach_the_run_s_figures_and_fail_it(queue: JobQueue) -> None:
    job_id, job = job_of(queue)
    ledger = keyed_run(job, "a", steady(1.0, 20.0), Mark.LOST)
    timeline = history(job_id, (E.TIMEOUT, "worker watchdog", 19.9))
    result = figures([job_id], {job_id: job}, {job_id: timeline}, ledger, Path("l"),
                     no_reference, {}, timing=TIMING)  # fmt: skip
    assert result["healthy_jobs_timed_out"] == 1
    assert {"healthy_jobs_timed_out", "attempts_burned_by_outage", "overwritten_images",
            "stalls_late"} <= set(FAULT_FIGURES)  # fmt: skip


def test_a_run_whose_database_was_replaced_under_it_earns_its_timeout(queue: JobQueue) -> None:
    job_id, job = job_of(queue)
    ledger = keyed_run(job, "a", steady(1.0, 10.0), Mark.PAUSED)  # went on in the old file
    timeline = history(job_id, (E.TIMEOUT, "watchdog", 9.0))  # in the restored copy
    replaced = Timing(3.0, 0.5, replaced_at=[5.0])
    assert (
        fault_figures({job_id: job}, {job_id: timeline}, ledger, replaced)["healthy_jobs_timed_out"]
        == 0
    )
    assert (
        fault_figures({job_id: job}, {job_id: timeline}, ledger, TIMING)["healthy_jobs_timed_out"]
        == 1
    )


# --- a busy machine (issue 41) ---------------------------------------------------------------

VERDICT = (
    "stuck: no step finished for 1.6 s and the worker used no CPU time for 1.5 s; its slowest "
    "recent step took 0.05 s (limit 1 s)"
)


def stuck_row(job_id: int, at: float, message: str = VERDICT) -> JobTransition:
    return JobTransition(
        job_id=job_id, attempt=1, from_status=S.PROCESSING, to_status=S.TIMEOUT,
        event=E.TIMEOUT, source="worker", at=at, message=message,
    )  # fmt: skip


def test_a_stuck_verdict_on_a_job_nobody_stalled_is_a_healthy_job_called_stuck(
    queue: JobQueue,
) -> None:
    (healthy, job), (planted, other) = job_of(queue, "healthy"), job_of(queue, "planted")
    ledger = [
        *keyed_run(job, "a", steady(1.0, 5.0), None),
        *keyed_run(other, "b", steady(1.0, 5.0), None),
        LedgerEntry(planted, "b", Mark.STALLED, 5.0),
    ]
    timelines = {
        healthy: [*history(healthy)[:2], stuck_row(healthy, 5.3)],
        planted: [*history(planted)[:2], stuck_row(planted, 6.2)],
    }
    timing = Timing(heartbeat_interval_s=0.5, planted=[planted])
    result = fault_figures({healthy: job, planted: other}, timelines, ledger, timing)
    assert result["healthy_jobs_called_stuck"] == 1
    # The planted hang: judged 1.2 s after its step; its verdict's limit 1 s + a 0.5 s beat
    # + the CPU samples' 0.25 s.
    assert (result["hang_detected_s"], result["hang_bound_s"], result["hangs_late"]) == (
        1.2, 1.75, 0,
    )  # fmt: skip
    assert {"healthy_jobs_called_stuck", "hangs_late"} <= set(FAULT_FIGURES)


def test_a_hang_judged_late_or_never_is_late(queue: JobQueue) -> None:
    planted, job = job_of(queue, "planted")
    ledger = [
        *keyed_run(job, "a", steady(1.0, 5.0), None),
        LedgerEntry(planted, "a", Mark.STALLED, 5.0),
    ]
    timing = Timing(heartbeat_interval_s=0.5, planted=[planted])
    late = [*history(planted)[:2], stuck_row(planted, 6.8)]
    assert fault_figures({planted: job}, {planted: late}, ledger, timing)["hangs_late"] == 1
    lifted = [*ledger, LedgerEntry(planted, "a", Mark.STEP, 25.0, 21)]  # nobody judged it
    result = fault_figures({planted: job}, {planted: history(planted)[:2]}, lifted, timing)
    assert (result["hang_detected_s"], result["hangs_late"]) == (20.0, 1)


def test_a_stall_is_noticed_by_its_workers_stuck_verdict(queue: JobQueue) -> None:
    job_id, job = job_of(queue)
    ledger = [
        *keyed_run(job, "a", steady(1.0, 10.0, every=0.5), None),
        LedgerEntry(job_id, "a", Mark.STALLED, 10.0),
    ]
    judged = [*history(job_id)[:2], stuck_row(job_id, 11.5)]
    result = fault_figures({job_id: job}, {job_id: judged}, ledger, TIMING)
    assert (result["stall_detected_s"], result["stalls_late"]) == (1.5, 0)


def test_a_stall_whose_database_file_was_replaced_before_it_was_noticed_is_unmeasured(
    queue: JobQueue,
) -> None:
    """The restored copy lost the verdict; the next row is the recovery's, 40 s later."""
    job_id, job = job_of(queue)
    ledger = [
        *keyed_run(job, "a", steady(1.0, 10.0, every=0.5), None),
        LedgerEntry(job_id, "a", Mark.STALLED, 10.0),
    ]
    recovered = history(job_id, (E.TIMEOUT, "recovery", 50.0))
    replaced = Timing(heartbeat_timeout_s=3.0, heartbeat_interval_s=0.5, replaced_at=[12.0])
    result = fault_figures({job_id: job}, {job_id: recovered}, ledger, replaced)
    assert (result["stalls"], result["stalls_late"], result["stalls_unmeasured"]) == (0, 0, 1)
    before = Timing(heartbeat_timeout_s=3.0, heartbeat_interval_s=0.5, replaced_at=[9.0])
    result = fault_figures({job_id: job}, {job_id: recovered}, ledger, before)
    assert (result["stall_detected_s"], result["stalls_late"]) == (40.0, 1)  # measured: late
