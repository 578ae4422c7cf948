"""Random walks over the real queue on a real store (SQLite file, PostgreSQL schema),
checked after every step."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from contextlib import ExitStack
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from app.engine.jobs.graph import graph_listener, orphaned_children, reconcile
from app.engine.jobs.graph_sql import InvalidDependency
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue, NotHoldingJob
from app.engine.jobs.states import (
    TRANSITIONS,
    JobEvent,
    JobStatus,
    TransitionNotAllowed,
    allowed_events,
    is_already_satisfied,
)
from app.models.opening import open_database
from tests import pg

WORKERS = ["w1", "w2", "w3"]


class QueueMachine(RuleBasedStateMachine):
    jobs = Bundle("jobs")
    backend = "sqlite"  # set per test run, see `test_queue_machine`

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="easel-machine-"))
        self.store = ExitStack()  # a fresh store per example: file or schema, removed after
        location = self.store.enter_context(pg.location(self.backend, str(self.folder / "jobs.db")))
        self.queue = JobQueue(open_database(location))
        self.versions: dict[int, int] = {}
        self.terminal_versions: dict[int, int] = {}
        self.queue.listeners.append(graph_listener(self.queue))
        # The same database without the graph listener: an app that died after a commit.
        self.crashed_queue = JobQueue(self.queue.db)
        self.parents: dict[int, list[int]] = {}
        self.crashed_since_reconcile = False

    def teardown(self) -> None:
        self.queue.db.dispose()
        self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    @rule(target=jobs, priority=st.integers(0, 3))
    def submit(self, priority: int) -> int:
        return self.queue.submit(GenerationParams("a red square", steps=3), priority=priority)

    @rule(worker=st.sampled_from(WORKERS))
    def claim(self, worker: str) -> None:
        before = {s: n for s, n in self.queue.count_by_status().items()}
        job = self.queue.claim(worker)
        if job is None:
            assert before.get(JobStatus.PENDING, 0) == 0
        else:
            assert (job.status, job.worker_id) == ("PROCESSING", worker)

    @rule(job_id=jobs, event=st.sampled_from([e for e in JobEvent if e is not JobEvent.SUBMIT]))
    def fire(self, job_id: int, event: JobEvent) -> None:
        before = self.queue.get(job_id)
        status = JobStatus(before.status)
        try:
            record = self.queue.fire(job_id, event, source="machine")
        except TransitionNotAllowed:
            # START only ever happens through the atomic claim, UNBLOCK once all parents succeeded.
            assert (status, event) not in TRANSITIONS or event in (JobEvent.START, JobEvent.UNBLOCK)
            assert not is_already_satisfied(status, event)
            assert self.queue.get(job_id).version == before.version
            return
        if is_already_satisfied(status, event):
            assert not record.changed and self.queue.get(job_id).version == before.version
        else:
            assert record.to_status is TRANSITIONS[(status, event)]

    @rule(job_id=jobs, data=st.data())
    def fire_an_allowed_event(self, job_id: int, data: st.DataObject) -> None:
        """Mostly legal moves, so walks go deep (pause, stop, resume, retry, ...)."""
        status = JobStatus(self.queue.get(job_id).status)
        choices = sorted(allowed_events(status) - {JobEvent.START})
        if choices:
            self.fire(job_id, data.draw(st.sampled_from(choices)))

    @rule(job_id=jobs, worker=st.sampled_from(WORKERS))
    def worker_completes(self, job_id: int, worker: str) -> None:
        holder = self.queue.get(job_id).worker_id
        try:
            self.queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id=worker)
        except NotHoldingJob:
            assert holder != worker
        except TransitionNotAllowed:
            pass

    @rule(job_id=consumes(jobs))
    def forget(self, job_id: int) -> None:
        """Stop touching a job (keeps the bundle small); invariants still check it."""

    # --- dependent jobs ----------------------------------------------------------------------

    @rule(target=jobs, parents=st.lists(jobs, min_size=1, max_size=3, unique=True))
    def submit_child(self, parents: list[int]) -> int:
        try:
            child = self.queue.submit(GenerationParams("a blue cat", steps=3), parents=parents)
        except InvalidDependency:
            assert any(self.queue.get(p).status == JobStatus.CANCELLED for p in parents)
            return multiple()  # type: ignore[return-value]
        self.parents[child] = parents
        return child

    @rule(job_id=jobs)
    def complete_then_crash_before_the_listener(self, job_id: int) -> None:
        try:
            record = self.crashed_queue.fire(job_id, JobEvent.COMPLETE, source="machine")
        except TransitionNotAllowed:
            return
        self.crashed_since_reconcile = True
        assert record.changed

    @rule(job_id=jobs)
    def cancel_then_crash_before_the_listener(self, job_id: int) -> None:
        try:
            self.crashed_queue.cancel(job_id, source="machine")
        except TransitionNotAllowed:
            return
        self.crashed_since_reconcile = True

    @rule()
    def reconcile_blocked_jobs(self) -> None:
        reconcile(self.queue)
        self.crashed_since_reconcile = False

    @invariant()
    def no_child_runs_before_all_its_parents_succeeded(self) -> None:
        for child, parents in self.parents.items():
            moved_on = {t.event for t in self.queue.timeline(child)} & {"UNBLOCK", "START"}
            if moved_on:
                assert all(self.queue.get(p).status == JobStatus.SUCCESS for p in parents)

    @invariant()
    def no_child_blocked_once_its_parents_decided_after_reconciliation(self) -> None:
        if not self.crashed_since_reconcile:
            assert orphaned_children(self.queue.db) == 0

    @invariant()
    def every_cascade_cancel_has_a_history_row_naming_the_parent(self) -> None:
        for child, parents in self.parents.items():
            for row in self.queue.timeline(child):
                if row.from_status == "BLOCKED" and row.source in ("graph", "reconcile"):
                    assert row.event == "CANCEL" or row.event == "UNBLOCK"
                    if row.event == "CANCEL":
                        named = int(row.message.removeprefix("parent #").split()[0])
                        assert named in parents
                        assert self.queue.get(named).status == JobStatus.CANCELLED

    @invariant()
    def every_history_is_a_legal_walk_and_matches_its_row(self) -> None:
        for job in self.queue.jobs(limit=10_000):
            assert job.id is not None
            timeline = self.queue.timeline(job.id)
            assert timeline[0].event in ("SUBMIT", "SUBMIT_AFTER")
            assert timeline[0].from_status is None
            for previous, row in itertools.pairwise(timeline):
                assert row.from_status == previous.to_status
                key = (JobStatus(row.from_status), JobEvent(row.event))
                assert TRANSITIONS[key] == JobStatus(row.to_status)
            assert job.status == timeline[-1].to_status
            assert job.version == len(timeline) - 1

    @invariant()
    def versions_only_grow_and_terminal_jobs_never_change(self) -> None:
        for job in self.queue.jobs(limit=10_000):
            assert job.id is not None
            assert job.version >= self.versions.get(job.id, 0)
            self.versions[job.id] = job.version
            if job.id in self.terminal_versions:
                assert job.version == self.terminal_versions[job.id]
            if JobStatus(job.status).is_terminal:
                self.terminal_versions[job.id] = job.version


@pytest.mark.parametrize("backend", pg.BACKENDS)
def test_queue_machine(backend: str) -> None:
    if backend != "sqlite":
        with pg.fresh_schema():
            pass  # skips (or fails in CI) here, not inside hypothesis, when there is no server
    machine = type(f"QueueMachine_{backend}", (QueueMachine,), {"backend": backend})
    # The machine's rules are the same on both stores: 60 runs on SQLite; 25 on PostgreSQL,
    # where its statements run on the other dialect (they took 22 s of the suite there).
    examples = 60 if backend == "sqlite" else 25
    run_state_machine_as_test(
        machine, settings=settings(max_examples=examples, stateful_step_count=40, deadline=None)
    )
