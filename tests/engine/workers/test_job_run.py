"""`JobRun` on its own: a real SQLite queue, the scripted runner, no worker process.

The run's context is built here by hand, so each test decides what the "worker" does
between steps (the app cancels, pauses, another worker takes the job) through `send`,
which the run calls synchronously at every step checkpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.engine.generation.outcome import GenerationOutcome, StepDecision, StepProgress
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, params_of
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.workers import job_run
from app.engine.workers.job_run import JobRun, RunContext, RunnerLike
from app.engine.workers.messages import MessageKind
from app.models.opening import open_database
from app.models.tables import Job
from app.testing.scripted_runner import ScriptedRunner, fake_image
from tests import pg
from tests.engine.workers.worker_fixtures import events, fake_params

S = JobStatus
WORKER = "worker-a"
OTHER = "worker-b"


@dataclass
class Sent:
    """What the run told the app, and a hook to act at a given step."""

    messages: list[tuple[MessageKind, int | None, dict[str, Any]]] = field(default_factory=list)
    at_step: dict[int, Callable[[], object]] = field(default_factory=dict)

    def __call__(self, kind: MessageKind, job_id: int | None = None, **fields: Any) -> None:
        self.messages.append((kind, job_id, fields))
        if kind is MessageKind.PROGRESS and fields["step"] in self.at_step:
            self.at_step.pop(fields["step"])()

    def steps(self) -> list[int]:
        return [f["step"] for kind, _, f in self.messages if kind is MessageKind.PROGRESS]


def context(
    queue: JobQueue,
    home: Path,
    sent: Sent,
    *,
    runner: RunnerLike | None = None,
    pause_requested: Callable[[], str | None] = lambda: None,
    worker_id: str = WORKER,
    watched: bool = True,
) -> RunContext:
    return RunContext(
        queue=queue, worker_id=worker_id, runner=runner or ScriptedRunner(),
        outputs_dir=home / "outputs", checkpoints_dir=home / "checkpoints", send=sent,
        pause_requested=pause_requested, heartbeat_interval_s=0.1, progress_interval_s=0.0,
        watched=watched,
    )  # fmt: skip


def claim(queue: JobQueue, worker_id: str = WORKER) -> Job:
    job = queue.claim(worker_id)
    assert job is not None
    return job


def run_job(ctx: RunContext) -> Job:
    job = claim(ctx.queue, ctx.worker_id)
    JobRun(ctx, job).run()
    return ctx.queue.get(job.id or 0)


def test_a_job_runs_to_success_with_progress_and_its_image(queue: JobQueue, tmp_path: Path) -> None:
    sent = Sent()
    job_id = queue.submit(fake_params(steps=3))
    job = run_job(context(queue, tmp_path, sent))
    assert job.status == S.SUCCESS and job.id == job_id
    assert Path(job.output_path or "").read_bytes() == fake_image(params_of(job))
    assert (job.progress_step, job.progress_total) == (3, 3)
    assert sent.steps() == [1, 2, 3]
    assert sent.messages[0][0] is MessageKind.STARTED
    assert sent.messages[-1][0] is MessageKind.FINISHED
    assert events(queue, job_id) == ["SUBMIT", "START", "COMPLETE"]


def test_a_cancel_takes_effect_at_the_next_step_checkpoint(queue: JobQueue, tmp_path: Path) -> None:
    sent = Sent()
    job_id = queue.submit(fake_params(steps=10))
    sent.at_step[2] = lambda: queue.cancel(job_id)
    job = run_job(context(queue, tmp_path, sent))
    assert job.status == S.CANCELLED
    assert sent.steps() == [1, 2]
    assert events(queue, job_id) == ["SUBMIT", "START", "CANCEL", "STOPPED"]
    assert not any((tmp_path / "outputs").glob("*.png"))


def test_a_paused_job_resumes_where_it_stopped(queue: JobQueue, tmp_path: Path) -> None:
    sent = Sent()
    job_id = queue.submit(fake_params(steps=6))
    sent.at_step[4] = lambda: queue.pause(job_id)
    ctx = context(queue, tmp_path, sent)
    paused = run_job(ctx)
    assert paused.status == S.PAUSED
    assert paused.checkpoint_path and Path(paused.checkpoint_path).is_file()
    queue.resume(job_id)
    done = run_job(ctx)
    assert done.status == S.SUCCESS
    assert sent.steps() == [1, 2, 3, 4, 5, 6]  # 5 and 6 only: the rest came from the checkpoint


def test_a_stopping_worker_pauses_the_job_in_hand(queue: JobQueue, tmp_path: Path) -> None:
    sent = Sent()
    job_id = queue.submit(fake_params(steps=5))
    job = run_job(context(queue, tmp_path, sent, pause_requested=lambda: "the worker is stopping"))
    assert job.status == S.PAUSED
    assert sent.steps() == [1]
    assert queue.timeline(job_id)[2].message == "the worker is stopping"


def test_a_failure_is_recorded_through_the_table(queue: JobQueue, tmp_path: Path) -> None:
    job_id = queue.submit(fake_params("fail", steps=5))
    job = run_job(context(queue, tmp_path, Sent()))
    assert job.status == S.FAILED
    assert "scripted failure" in (job.error or "")
    assert events(queue, job_id)[-1] == "FAIL"


def test_a_run_that_lost_its_job_writes_nothing(queue: JobQueue, tmp_path: Path) -> None:
    """Timed out and claimed by another worker mid-run: this run must touch nothing."""
    sent = Sent()
    job_id = queue.submit(fake_params(steps=6))

    def taken_elsewhere() -> None:
        queue.fire(job_id, JobEvent.TIMEOUT, source="watchdog")
        queue.fire(job_id, JobEvent.RETRY, source="retry-policy")
        claim(queue, OTHER)

    sent.at_step[2] = taken_elsewhere
    job = run_job(context(queue, tmp_path, sent))
    assert job.status == S.PROCESSING and job.worker_id == OTHER
    assert sent.steps() == [1, 2]
    assert events(queue, job_id) == ["SUBMIT", "START", "TIMEOUT", "RETRY", "START"]
    assert not any((tmp_path / "outputs").glob("*.png"))
    assert not any(kind is MessageKind.FINISHED for kind, _, _ in sent.messages)


def test_the_step_loop_never_writes_progress_itself(
    queue: JobQueue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Progress rows are written from the heartbeat thread; the last step before settling."""
    writers: list[str] = []
    original = queue.report_progress

    def recording(*args: Any, **kwargs: Any) -> bool:
        writers.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(queue, "report_progress", recording)
    sent = Sent()
    job_id = queue.submit(fake_params("step=0.05", steps=8))
    sent.at_step[6] = lambda: queue.pause(job_id)
    job = run_job(context(queue, tmp_path, sent))
    assert job.status == S.PAUSED and job.progress_step == 6
    loop_thread = threading.current_thread().name
    assert writers.count(loop_thread) <= 1  # at most the flush before settling
    assert "heartbeat" in writers


def test_a_completed_run_writes_its_last_step_with_its_settling(
    queue: JobQueue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No progress write of its own before COMPLETE (a commit that waited for the disk
    between every two jobs): the settling transition writes the last step and total."""
    written: list[int] = []
    original = queue.report_progress

    def recording(*args: Any, **kwargs: Any) -> bool:
        written.append(args[2])
        return original(*args, **kwargs)

    monkeypatch.setattr(queue, "report_progress", recording)
    queue.submit(fake_params("step=0", steps=4))  # over before the heartbeat's first tick
    job = run_job(context(queue, tmp_path, Sent()))
    assert job.status == S.SUCCESS and (job.progress_step, job.progress_total) == (4, 4)
    assert written == []


def test_runs_one_after_another_write_progress_on_one_connection(
    queue: JobQueue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run's heartbeat thread hands its database connection to the next run's as it
    ends: a worker kept one more open for every job (two file descriptors on SQLite, up to
    the process's limit) and opened a fresh one for each."""
    connections: set[int] = set()
    original = queue.report_progress

    def recording(*args: Any, **kwargs: Any) -> bool:
        if threading.current_thread().name == "heartbeat":
            connections.add(id(queue.db.hot_connection()))
        return original(*args, **kwargs)

    monkeypatch.setattr(queue, "report_progress", recording)
    ctx = context(queue, tmp_path, Sent())
    ran = [queue.submit(fake_params("step=0.03", steps=3, seed=seed)) for seed in range(3)]
    for job_id in ran:
        assert run_job(ctx).id == job_id
    assert all(queue.get(job_id).status == S.SUCCESS for job_id in ran)
    assert len(connections) == 1


class OffersPreviews(ScriptedRunner):
    """The scripted runner, offering a preview at every step and counting those made."""

    def __init__(self) -> None:
        super().__init__()
        self.made = 0

    def run(
        self,
        params: GenerationParams,
        inputs: RunInputs = NO_INPUTS,
        *,
        output_path: Path,
        checkpoint_path: Path,
        on_step: Callable[[StepProgress], Any],
    ) -> GenerationOutcome:
        def with_preview(progress: StepProgress) -> StepDecision:
            decision: StepDecision = on_step(replace(progress, render_preview=self._render))
            return decision

        return super().run(
            params, inputs, output_path=output_path, checkpoint_path=checkpoint_path,
            on_step=with_preview,
        )  # fmt: skip

    def _render(self) -> bytes:
        self.made += 1
        return b"preview"


@pytest.mark.parametrize("watched", [True, False])
def test_previews_are_made_only_for_a_worker_someone_watches(
    queue: JobQueue, tmp_path: Path, watched: bool
) -> None:
    sent, runner = Sent(), OffersPreviews()
    queue.submit(fake_params(steps=3))
    job = run_job(context(queue, tmp_path, sent, runner=runner, watched=watched))
    assert job.status == S.SUCCESS
    previews = [f["preview_png"] for kind, _, f in sent.messages if kind is MessageKind.PROGRESS]
    assert previews == ([b"preview"] * 3 if watched else [None] * 3)
    assert runner.made == (3 if watched else 0)


def test_rolling_checkpoints_are_asked_a_save_early_and_never_while_one_is_written(
    queue: JobQueue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue.submit(fake_params(steps=10))
    ctx = replace(context(queue, tmp_path, Sent()), checkpoint_interval_s=10.0)
    now = [1000.0]
    monkeypatch.setattr(job_run, "time", SimpleNamespace(monotonic=lambda: now[0]))
    run = JobRun(ctx, claim(queue))

    def decision(step: int, **save: Any) -> StepDecision:
        return run.on_step(StepProgress(step, 10, float(step), **save))

    now[0] += 9.85
    assert decision(1) is StepDecision.CONTINUE  # 9.85 s of a 10 s interval
    assert decision(2, last_save_s=0.2) is StepDecision.CHECKPOINT  # done by 10 s, not 10.2
    now[0] += 9.85
    assert decision(3, last_save_s=0.2, saving=True) is StepDecision.CONTINUE  # in flight
    assert decision(4, last_save_s=0.2) is StepDecision.CHECKPOINT
    now[0] += 10.0
    assert decision(10) is StepDecision.CONTINUE  # the last step: the image comes next


def test_slow_saves_stretch_the_interval_to_cost_at_most_2_percent_up_to_5_minutes(
    queue: JobQueue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clip's 1 s save every 10 s would cost a tenth of the run: every 50 s instead (asked
    a save early); a 30 s save would want 25 minutes, and gets 5 (a crash loses no more),
    asked at most half that early."""
    from app.engine.workers.checkpoint_pacing import paced_interval_s

    assert paced_interval_s(10.0, 0.01) == 10.0 and paced_interval_s(0.0, 1.0) == 0.0
    assert paced_interval_s(3600.0, 30.0) == 3600.0  # a longer interval asked is kept
    queue.submit(fake_params(steps=100))
    ctx = replace(context(queue, tmp_path, Sent()), checkpoint_interval_s=10.0)
    now = [1000.0]
    monkeypatch.setattr(job_run, "time", SimpleNamespace(monotonic=lambda: now[0]))
    run = JobRun(ctx, claim(queue))

    def decision(step: int, last_save_s: float) -> StepDecision:
        return run.on_step(StepProgress(step, 100, float(step), last_save_s=last_save_s))

    now[0] += 10.0
    assert decision(1, 0.0) is StepDecision.CHECKPOINT  # nothing measured yet: as asked
    now[0] += 48.5
    assert decision(2, 1.0) is StepDecision.CONTINUE
    now[0] += 0.5
    assert decision(3, 1.0) is StepDecision.CHECKPOINT  # 49 s: a 1 s save early of 50 s
    now[0] += 269.0
    assert decision(4, 30.0) is StepDecision.CONTINUE  # 269 s of 300 - 30
    now[0] += 1.0
    assert decision(5, 30.0) is StepDecision.CHECKPOINT


@pytest.mark.parametrize("shared", [False, True], ids=["sqlite", "postgresql"])
def test_on_a_shared_database_a_save_is_asked_early_by_its_copy_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    """There the newest state is the one copied into the database (what another machine
    resumes from): 0.1 s to save, up to 0.25 s until the heartbeat thread copies it, 1 s
    to copy: asked 1.35 s early, not 0.1 s."""
    with pg.location("postgresql" if shared else "sqlite", str(tmp_path / "jobs.db")) as where:
        queue = JobQueue(open_database(where))
        try:
            queue.submit(fake_params(steps=10))
            ctx = replace(
                context(queue, tmp_path, Sent()), checkpoint_interval_s=10.0,
                heartbeat_interval_s=0.25, progress_interval_s=0.25,
            )  # fmt: skip
            now = [1000.0]
            monkeypatch.setattr(job_run, "time", SimpleNamespace(monotonic=lambda: now[0]))
            run = JobRun(ctx, claim(queue))
            run.shared.last_copy_s = 1.0
            now[0] += 8.7
            decision = run.on_step(StepProgress(1, 10, 1.0, last_save_s=0.1))
            assert decision is (StepDecision.CHECKPOINT if shared else StepDecision.CONTINUE)
        finally:
            queue.db.dispose()
