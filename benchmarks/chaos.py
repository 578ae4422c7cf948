"""Chaos: jobs, workers, random SIGKILLs of workers and of the app, cancels and pauses.

A supervising process (as the GUI would be) runs the workers; this driver submits the
jobs (a third of them chained after an earlier job, so they wait BLOCKED for it), SIGKILLs
workers that hold a job, SIGKILLs the supervising process and starts a new one (which runs
recovery first), and cancels, pauses and resumes jobs at random. At the end it resumes
what is paused, lets the queue drain, and checks every job against its timeline and
against a ledger the workers keep of every step they run (`benchmarks/chaos_checks.py`
says what counts as lost, double_runs, illegal_paths, stuck and unrecorded;
`orphaned_children` is `app.engine.jobs.graph.orphaned_children`).

With `--db URL` (a PostgreSQL server that `scripts/pg_test_server.sh` runs) the queue is a
fresh schema on that server, and there is no supervising process: `--machines` headless
workers, each a process of its own with its own data folder and name, as separate machines
would be, claim from the server and run the watchdog and retry policy themselves (as
`python -m app worker` does). A killed worker is started again, as a service manager
would; instead of the supervisor, the PostgreSQL server is restarted `--server-restarts`
times (`scripts/pg_test_server.sh stop`, then `start`).

Prints `name: value` lines; exits 1 if any of those is not 0, a kill target was missed
(`missed`: the kills, restarts and faults short of their targets), or the ledger is empty
(then it says so instead of printing figures nobody checked). The chaos follows the
workers' progress, not the clock (`KILLS_DONE_BY`), so it reaches its targets on a fast
machine and a slow one alike.

    .venv/bin/python benchmarks/chaos.py [--jobs 200] [--worker-kills 20]
        [--supervisor-kills 5] [--runner tiny|fake] [--seed 1]
        [--faults disk,lock,stop,ckpt] [--lock-seconds 20] [--disk-seconds 4]
    .venv/bin/python benchmarks/chaos.py --db "$(scripts/pg_test_server.sh start)" \
        [--machines 4] [--server-restarts 3]

`--faults` adds the faults of `benchmarks/chaos_faults.py` to the random actions. `disk`
fills the data folder's disk, so it needs `--home` on a small filesystem of its own:

    mount -t tmpfs -o size=300m tmpfs /tmp/chaos-home
    .venv/bin/python benchmarks/chaos.py --faults disk,lock,stop,ckpt --home /tmp/chaos-home

The faults of issue 21 (`chaos_faults` says what each does) are measured by
`healthy_jobs_timed_out`, `attempts_burned_by_outage`, `overwritten_images` and
`stall_detected_s` (`chaos_checks`). `replace-db` runs on SQLite, `skew` and `db-outage`
on PostgreSQL: without `--db` the benchmark starts a private server of its own
(`chaos_server`), the only kind `db-outage` may stop; `stall` runs on either. Short runs:

    .venv/bin/python benchmarks/chaos.py --runner fake --jobs 60 --worker-kills 2 \
        --supervisor-kills 1 --faults replace-db,stall --settle-s 120
    .venv/bin/python benchmarks/chaos.py --runner fake --jobs 60 --worker-kills 2 \
        --machines 3 --server-restarts 0 --faults skew,db-outage --settle-s 120
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# Light imports only: spawned workers re-import the main module before they start.
from app.engine import paths  # noqa: E402
from app.engine.generation.outcome import StepDecision, StepProgress  # noqa: E402
from app.engine.jobs.graph import orphaned_children  # noqa: E402
from app.engine.jobs.params import GenerationParams  # noqa: E402
from app.engine.jobs.queue import JobNotFound, JobQueue, params_of  # noqa: E402
from app.engine.jobs.retry import RetryPolicy  # noqa: E402
from app.engine.jobs.states import JobStatus, TransitionNotAllowed  # noqa: E402
from app.engine.settings import DB_ENV, Settings  # noqa: E402
from app.engine.store.opening import open_queue  # noqa: E402
from app.engine.workers.liveness import (  # noqa: E402
    WorkerIdentity,
    is_alive,
    remove_stale_locks,
)
from app.engine.workers.worker import (  # noqa: E402
    EXIT_STUCK,
    LIVENESS_FOLDER,
    RunnerLike,
    WorkerConfig,
    threads_per_worker,
)
from app.errors import DatabaseError  # noqa: E402
from app.models.postgres import scratch_schema  # noqa: E402
from app.models.tables import Job  # noqa: E402
from app.testing.ledger import LEDGER_ENV, LEDGER_FILE, ledger_path, read_ledger  # noqa: E402
from benchmarks.chaos_checks import (  # noqa: E402
    FAULT_FIGURES,
    EmptyLedger,
    Parents,
    Reference,
    Timing,
    figures,
    is_stuck,
)
from benchmarks.chaos_faults import (  # noqa: E402
    SERVER_ONLY,
    SQLITE_ONLY,
    DriverHooks,
    FaultDriver,
    FaultKind,
    FaultRefused,
    check_combination,
    check_fillable,
    parse_faults,
    skewed_environment,
)
from benchmarks.chaos_server import NoServer, PrivateServer  # noqa: E402

S = JobStatus
TINY_MODEL = "tiny-test"
SETTLE_TIMEOUT_S = 900.0
ORPHAN_EXIT_S = 30.0
FAULT_SHARE = 0.3  # of the random actions, when --faults is given
# The chaos is paced by the workers' progress, never by the clock: the k-th of n worker
# kills is due once this share of the queue's steps is done times (k-1)/n, and is made at
# the next look that finds a worker mid-job (looks are `--interval` apart); a random action
# (a kill, cancel, pause, resume or fault) follows each 1/`ACTIONS_PER_JOB` of a mean
# job's steps. Paced by the clock, a fast machine drained the queue before the kill
# targets were met, and a slow one was cancelled away before its workers ran a step.
KILLS_DONE_BY = 0.75
ACTIONS_PER_JOB = 1.0
# While the disk is full or another process holds the lock, the driver's own cancel or
# pause may fail like any client's; that is the fault, not a bug of the driver.
DRIVER_BLOCKING_FAULTS = frozenset({FaultKind.DISK, FaultKind.LOCK})
CHAINED_SHARE = 1 / 3  # of the jobs, submitted after an earlier job (issue 13)
PG_SERVER = REPO / "scripts" / "pg_test_server.sh"
SERVER_DOWN_S = (1.0, 4.0)  # how long the PostgreSQL server stays stopped, at random
MACHINES_FOLDER = "machines"  # --db: one data folder per machine, under the driver's
RETRY_POLICY = RetryPolicy(base_delay_s=0.2, max_delay_s=2.0)
CANCELLABLE = [S.PENDING, S.PROCESSING, S.PAUSED, S.BLOCKED]
# Quick heartbeats; a rolling checkpoint every second (the least allowed), so that a killed
# job resumes from one (jobs last seconds: with the default 10 s, each kill restarted its
# job from step 0 and the resume path went untested).
CHAOS_SETTINGS: dict[str, Any] = {
    "heartbeat_timeout_s": 3.0, "cancel_grace_s": 2.0, "checkpoint_interval_s": 1.0,
}  # fmt: skip
EXIT_SERVER_AWAY = 3  # --db: a machine's worker ended as the server could not be reached
EXIT_WORKERS_LEFT = 5  # the supervising process: every worker left (replaced database file)
HEARTBEAT_INTERVAL_S = 0.5
RESTORE_FORGETS = 3  # replace-db: jobs submitted after the backup, which the restore forgets
# replace-db: the artist keeps one seed and varies the prompt (as in issue 21's report), so
# that a new job given a forgotten job's id also gets its image's name.
REPLACE_SEED = 1
# ... and those jobs go first (claims take the highest priority), so that they run on the
# old file before the restore, as the work a user is waiting for would.
URGENT = 1
CONTENTION_WORK_S = 0.1  # contention: a fake step computes this long (1/8 of a core: 0.8 s)


# --- the supervising process (what the GUI does) -------------------------------------------


def supervise(runner: str, workers: int) -> None:
    from app.engine.workers.supervisor import Supervisor
    from app.engine.workers.worker import database_file

    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stop.append(signum))
    queue = open_queue()
    settings = Settings(workers=workers, **CHAOS_SETTINGS)
    config = worker_config(
        settings, database_file(queue), runner, torch_threads=threads_per_worker(workers)
    )
    supervisor = Supervisor(
        queue, config, settings, policy=RETRY_POLICY, maintenance_interval_s=0.5
    )
    report = supervisor.start()
    print(json.dumps({"recovery": report.lines()}), flush=True)
    while not stop and not supervisor.all_retired:
        supervisor.poll()
        time.sleep(0.05)
    supervisor.shutdown(timeout=20)
    if not stop:  # every worker left for good: its database file was replaced under it
        sys.exit(EXIT_WORKERS_LEFT)


def machine(runner: str, name: str, workers_on_host: int) -> int:
    """One headless worker of a fleet on PostgreSQL (`--db`): `python -m app worker --name`,
    with the chaos settings and the ledger runner. SIGTERM pauses its job and ends it.

    A database error that reaches this far (in practice: the server was down while it
    opened its connections) ends it with one line and `EXIT_SERVER_AWAY`, as the worker
    command's `with_queue` does; the driver starts it again. Anything else is a crash."""
    try:
        run_machine(runner, name, workers_on_host)
    except DatabaseError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_SERVER_AWAY
    return 0


def run_machine(runner: str, name: str, workers_on_host: int) -> None:
    from app.engine.workers.maintenance import Maintenance
    from app.engine.workers.worker import run_worker

    queue = open_queue()
    settings = Settings(**CHAOS_SETTINGS)
    config = worker_config(
        settings, queue.db.location, runner, name=name,
        torch_threads=threads_per_worker(workers_on_host),  # the "machines" share our cores
    )  # fmt: skip
    with Maintenance(queue, heartbeat_timeout_s=settings.heartbeat_timeout_s, policy=RETRY_POLICY):
        run_worker(config)


def worker_config(
    settings: Settings, db_location: str, runner: str, **overrides: Any
) -> WorkerConfig:
    """The workers' configuration in a chaos run: quick heartbeats, the ledger runner."""
    from app.testing.ledger import real_ledger_runner, scripted_ledger_runner

    return WorkerConfig.from_settings(
        settings, db_location, heartbeat_interval_s=HEARTBEAT_INTERVAL_S, idle_poll_s=0.1,
        warm_model=TINY_MODEL if runner == "tiny" else None,
        runner_factory=real_ledger_runner if runner == "tiny" else scripted_ledger_runner,
        **overrides,
    )  # fmt: skip


# --- the driver ------------------------------------------------------------------------------


@dataclass
class Counts:
    worker_kills: int = 0
    supervisor_kills: int = 0
    server_restarts: int = 0
    cancels: int = 0
    pauses: int = 0
    resumes: int = 0
    # supervisor_crashes, machine_crashes, machine_db_exits, machine_stuck_exits,
    # restarted_after_replace, driver_refused, server_down_errors
    extra: Counter[str] = field(default_factory=Counter)


class Chaos:
    def __init__(
        self, args: argparse.Namespace, home: Path, server: PrivateServer | None = None
    ) -> None:
        self.args = args
        self.home = home
        self.rng = random.Random(args.seed)
        self.queue = open_queue()
        self.counts = Counts()
        self.parents: dict[int, list[int]] = {}  # filled by `submit_jobs`
        self.submitted: list[int] = []  # the jobs the checks hold the queue to
        self.forgettable: list[int] = []  # replace-db: submitted after the backup
        self.numbered = 0  # jobs submitted so far, forgotten ones too: no two prompts alike
        self.supervisor: subprocess.Popen[str] | None = None
        self.machines: dict[str, subprocess.Popen[str]] = {}  # --db: name -> its worker
        self.skewed: set[str] = set()  # machines whose clock is off, running now
        self.environments: dict[str, dict[str, str]] = {}  # a machine's own (its skew)
        self.logs = home / "supervisor.log"
        self._chosen: dict[int, WorkerIdentity] = {}  # pid -> the worker it was, when chosen
        self.killed_workers: list[str] = []  # identities of the workers SIGKILLed here
        self._acted_at_step = 0  # the queue's steps done at the last random action
        self._steps: dict[int, int] = {}  # job id -> its denoising steps
        self._own_queue: JobQueue | None = None  # the contention fault's thread reads this one
        hooks = DriverHooks(
            start_skewed=self.start_skewed_machine if self.on_server else None,
            job_to_stall=self._job_to_stall, server=server, ledger=ledger_path(),
            backed_up=self._submit_forgettable, replaced=self._after_replace,
            workers=self._live_workers,
        )  # fmt: skip
        self.faults = FaultDriver(
            args.faults, self.rng, home, worker_pid=self._busy_worker_pid,
            still_alive=self._is_our_worker, lock_s=args.lock_seconds, disk_s=args.disk_seconds,
            hooks=hooks,
        )  # fmt: skip

    def submit(self, count: int, priority: int = 0) -> list[int]:
        ids = submit_jobs(
            self.queue, count, self.args.runner, self.rng, self.parents,
            serial=self.numbered, seed=self.seed, priority=priority, work_s=self.work_s,
        )  # fmt: skip
        self.numbered += count
        self.submitted += ids
        return ids

    @property
    def seed(self) -> int | None:
        return REPLACE_SEED if FaultKind.REPLACE_DB in self.args.faults else None

    @property
    def work_s(self) -> float:
        """CPU seconds a fake step computes: under contention, steps must need the CPU."""
        return CONTENTION_WORK_S if FaultKind.CONTENTION in self.args.faults else 0.0

    @property
    def on_server(self) -> bool:
        return bool(self.args.db)

    # supervisor processes (SQLite) or machines (--db)

    def start_workers(self) -> None:
        if self.on_server:
            for number in range(self.args.machines):
                self.start_machine(f"machine-{number + 1}")
        else:
            self.start_supervisor()

    def start_supervisor(self) -> None:
        command = [sys.executable, __file__, "--supervise", "--runner", self.args.runner,
                   "--workers", str(self.args.workers)]  # fmt: skip
        with open(self.logs, "a", encoding="utf-8") as log:
            self.supervisor = subprocess.Popen(command, stdout=log, stderr=log, text=True)

    def start_machine(self, name: str, environment: dict[str, str] | None = None) -> None:
        """A headless worker named `name`, with a data folder of its own (no shared disk)."""
        machine_home = self.home / MACHINES_FOLDER / name
        machine_home.mkdir(parents=True, exist_ok=True)
        model = machine_home / paths.models_dir().relative_to(self.home) / TINY_MODEL
        if self.args.runner == "tiny" and not model.exists():  # each machine has the model
            model.parent.mkdir(parents=True, exist_ok=True)
            model.symlink_to(paths.models_dir() / TINY_MODEL)
        command = [sys.executable, __file__, "--machine", name, "--runner", self.args.runner,
                   "--workers", str(self.args.machines)]  # fmt: skip
        if environment is not None:
            self.environments[name] = environment  # kept when it is started again
        own = self.environments.get(name, {})
        environment = os.environ | own | {paths.HOME_ENV: str(machine_home)}
        with open(machine_home / "worker.out", "a", encoding="utf-8") as log:
            self.machines[name] = subprocess.Popen(
                command, stdout=log, stderr=log, text=True, env=environment
            )

    def start_skewed_machine(self, offset_s: float) -> Callable[[], None]:
        """The skew fault: one more machine, its clock `offset_s` off; returns its stop."""
        name = f"skewed-{len(self.skewed) + self.faults.injected[FaultKind.SKEW] + 1}"
        self.start_machine(name, skewed_environment(offset_s))
        self.skewed.add(name)

        def stop() -> None:
            process = self.machines.pop(name)  # not revived: its time is up
            self.skewed.discard(name)
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

        return stop

    def _job_to_stall(self) -> int | None:
        """A job mid-way on a worker whose clock is true, not stalled already."""
        stalled = self.faults.stalled_jobs()
        running = [
            job for job in self.queue.jobs([S.PROCESSING])
            if job.progress_step >= 1 and job.id not in stalled
            and not any(job.worker_id and name in job.worker_id for name in self.skewed)
        ]  # fmt: skip
        return self.rng.choice(running).id if running else None

    def _live_workers(self, planted: int) -> list[tuple[int, bool]]:
        """contention: the pids of the live workers holding jobs, each with whether its job
        is `planted` (called from the fault's own thread: a connection of its own)."""
        workers = []
        try:
            running = self._contention_queue().jobs([S.PROCESSING])
        except DatabaseError:
            return []
        for job in running:
            identity = WorkerIdentity.parse(job.worker_id or "")
            if identity and is_alive(identity, self._liveness_dir(identity)):
                workers.append((identity.pid, job.id == planted))
        return workers

    def _contention_queue(self) -> JobQueue:
        if self._own_queue is None:
            self._own_queue = open_queue()
        return self._own_queue

    def _submit_forgettable(self) -> None:
        """replace-db, after its backup: work the user adds, which the restore will forget."""
        ids = self.submit(RESTORE_FORGETS, priority=URGENT)
        self.submitted = self.submitted[: -len(ids)]
        self.forgettable += ids

    def _after_replace(self) -> None:
        """replace-db, once restored: this driver reopens the file at the path, as a new
        command would, and the user submits again, into ids the forgotten jobs had."""
        self.queue.db.dispose()
        if self._own_queue is not None:
            self._own_queue.db.dispose()
        self.counts.extra["forgotten_by_restore"] += len(self.forgettable)
        self.forgettable.clear()
        self.submit(RESTORE_FORGETS, priority=URGENT)

    def kill_supervisor(self) -> None:
        assert self.supervisor is not None
        self.supervisor.kill()
        self.supervisor.wait()
        self.counts.supervisor_kills += 1
        self.start_supervisor()  # it recovers before starting its workers

    def restart_server(self) -> None:
        """Stop the PostgreSQL server, leave it down a moment, start it again."""
        subprocess.run([str(PG_SERVER), "stop"], check=True, capture_output=True)
        time.sleep(self.rng.uniform(*SERVER_DOWN_S))
        subprocess.run([str(PG_SERVER), "start"], check=True, capture_output=True)
        self.counts.server_restarts += 1

    def stop_workers(self) -> None:
        if self.supervisor is not None:
            self.supervisor.send_signal(signal.SIGTERM)
            self.supervisor.wait(timeout=120)
        for process in self.machines.values():
            process.send_signal(signal.SIGTERM)  # as `python -m app worker`: pause, then exit
        for process in self.machines.values():
            process.wait(timeout=120)

    def revive_workers(self) -> None:
        """A supervisor that died of a fault (not of our kill) is started again, and counted;
        a machine whose worker ended (our kill; counted: a crash, or a database error as
        the server was away) is started again."""
        if self.supervisor is not None and self.supervisor.poll() is not None:
            # Workers stop on a database file replaced under them, as Easel's do; the user
            # starts Easel again, on the file now at the path. Anything else is a crash.
            left = self.supervisor.returncode == EXIT_WORKERS_LEFT
            self.counts.extra["restarted_after_replace" if left else "supervisor_crashes"] += 1
            self.start_supervisor()
        for name, process in list(self.machines.items()):
            if process.poll() is not None:
                if process.returncode == EXIT_SERVER_AWAY:
                    self.counts.extra["machine_db_exits"] += 1
                elif process.returncode == EXIT_STUCK:  # its step got stuck: it says so, exits
                    self.counts.extra["machine_stuck_exits"] += 1
                elif process.returncode != -signal.SIGKILL:
                    self.counts.extra["machine_crashes"] += 1
                self.start_machine(name)

    # the chaos

    def run(self) -> None:
        self.start_workers()
        goal_w = self.args.worker_kills
        goal_big = self.args.server_restarts if self.on_server else self.args.supervisor_kills
        deadline = time.monotonic() + self.args.settle_s
        while self.missed():
            if time.monotonic() > deadline:
                break  # reported as missed
            time.sleep(self.args.interval)  # a look, not a pace: see ACTIONS_PER_JOB
            self.faults.undo_due()
            self.revive_workers()
            try:
                done_steps, open_jobs = self.progress()
                if not open_jobs:
                    break  # the queue drained before the kill targets: reported as missed
                if self._warming_up():
                    continue  # acting now would only cancel jobs no worker has touched yet
            except DatabaseError:
                self.counts.extra["server_down_errors"] += 1
                continue
            due = goal_w and self.counts.worker_kills >= (self.big_kills() + 1) * (
                goal_w // max(1, goal_big)
            )
            if behind := self.faults.behind(self.args.each_fault) - self.faults.active():
                self._as_a_client(self.faults.inject_one, behind)
            elif self.big_kills() < goal_big and (due or not goal_w):
                self.restart_server() if self.on_server else self.kill_supervisor()
            elif self._kills_behind(goal_w, done_steps):
                self._as_a_client(self._kill_a_worker)
            elif done_steps - self._acted_at_step >= self.steps_per_action:
                self._acted_at_step = done_steps
                self._random_action()

    def missed(self) -> int:
        """Kill and fault targets not reached yet (0: all reached)."""
        goal_big = self.args.server_restarts if self.on_server else self.args.supervisor_kills
        faults = sum(
            self.args.each_fault - self.faults.injected[kind]
            for kind in self.faults.behind(self.args.each_fault)
        )
        return (
            max(0, self.args.worker_kills - self.counts.worker_kills)
            + max(0, goal_big - self.big_kills())
            + faults
        )

    def progress(self) -> tuple[int, int]:
        """(the queue's denoising steps done so far, its jobs not settled yet): a settled
        job counts all its steps, a running or paused one those it reached (a killed job
        that resumes from a checkpoint steps back a little; that only delays the pace)."""
        jobs = {job.id or 0: job for job in all_jobs(self.queue)}
        open_ids = {i for i, job in jobs.items() if is_stuck(job, jobs, self.parents)}
        done = 0
        for job_id in self.submitted:
            if (job := jobs.get(job_id)) is None:
                continue  # replace-db: forgotten by the restore
            steps = self._steps_of(job)
            done += min(job.progress_step, steps) if job_id in open_ids else steps
        return done, len(open_ids)

    def _steps_of(self, job: Job) -> int:
        job_id = job.id or 0
        if job_id not in self._steps:
            self._steps[job_id] = params_of(job).denoising_steps
        return self._steps[job_id]

    @property
    def total_steps(self) -> int:
        """The steps of every job submitted (known once they are: `progress` reads them)."""
        return max(1, sum(self._steps.get(job_id, 0) for job_id in self.submitted))

    @property
    def steps_per_action(self) -> float:
        return self.total_steps / max(1, len(self.submitted)) / ACTIONS_PER_JOB

    def big_kills(self) -> int:
        """The supervisor's kills, or (--db) the server's restarts."""
        return self.counts.server_restarts if self.on_server else self.counts.supervisor_kills

    def _kills_behind(self, goal: int, done_steps: int) -> bool:
        """Fewer worker kills than the share of the queue's steps already done calls for."""
        done_share = done_steps / self.total_steps
        return self.counts.worker_kills < goal * min(1.0, done_share / KILLS_DONE_BY)

    def _random_action(self) -> None:
        """A fault, a kill, or a user's cancel, pause or resume."""
        if self.faults.kinds and self.rng.random() < FAULT_SHARE:
            self.faults.inject_one()
            return
        roll = self.rng.random()
        if roll < 0.55:
            self._as_a_client(self._kill_a_worker)
        elif roll < 0.7:
            self._as_a_client(self._act, self.queue.cancel, CANCELLABLE, "cancels")
        elif roll < 0.85:
            self._as_a_client(self._act, self.queue.pause, [S.PENDING, S.PROCESSING], "pauses")
        else:
            self._as_a_client(self._act, self.queue.resume, [S.PAUSED], "resumes")

    def _as_a_client(self, action: Callable[..., object], *arguments: Any) -> None:
        """`action`, whose requests may be refused as any client's would be."""
        try:
            action(*arguments)
        except (TransitionNotAllowed, JobNotFound):
            pass  # the job moved on meanwhile: exactly the races this is here to provoke
        except DatabaseError:
            if not (self.on_server or self.faults.active() & DRIVER_BLOCKING_FAULTS):
                raise
            # The fault (or the server coming back up) refused our request as any client's.
            self.counts.extra["driver_refused"] += 1

    def _kill_a_worker(self) -> None:
        pid = self._busy_worker_pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            self.counts.worker_kills += 1
            self.killed_workers.append(str(self._chosen[pid]))

    def _busy_worker_pid(self) -> int | None:
        """A live worker holding a job mid-way (a step done), or None.

        Mid-job only: a worker still warming up has no job to lose, and killing fresh
        workers over and over would only measure torch's import time.
        """
        running = self.queue.jobs([S.PROCESSING])
        stalled = self.faults.stalled_jobs()  # what ends a stall must be the engine
        holders = [
            j.worker_id for j in running
            if j.worker_id and j.progress_step >= 1 and j.id not in stalled
        ]  # fmt: skip
        for worker_id in self.rng.sample(holders, len(holders)):
            identity = WorkerIdentity.parse(worker_id)
            # Identity, not bare pid: never shoot a process that merely reuses a dead pid.
            if identity and is_alive(identity, self._liveness_dir(identity)):
                self._chosen[identity.pid] = identity
                return identity.pid
        return None

    def _is_our_worker(self, pid: int) -> bool:
        """`pid` is still the worker `_busy_worker_pid` chose (its liveness lock is held)."""
        identity = self._chosen.get(pid)
        return identity is not None and is_alive(identity, self._liveness_dir(identity))

    def _liveness_dir(self, identity: WorkerIdentity) -> Path:
        """Where the worker keeps its liveness lock: the data folder of its machine."""
        if self.on_server:  # a machine's workers are named after it
            return self.home / MACHINES_FOLDER / identity.host / LIVENESS_FOLDER
        return self.home / LIVENESS_FOLDER

    def liveness_dirs(self) -> list[Path]:
        if self.on_server:
            return [self.home / MACHINES_FOLDER / name / LIVENESS_FOLDER for name in self.machines]
        return [self.home / LIVENESS_FOLDER]

    def _act(self, action: Callable[..., Any], statuses: list[JobStatus], name: str) -> None:
        stalled = self.faults.stalled_jobs()  # what ends a stall must be the engine
        jobs = [job for job in self.queue.jobs(statuses, limit=1000) if job.id not in stalled]
        if jobs:
            action(self.rng.choice(jobs).id, source="chaos")
            setattr(self.counts, name, getattr(self.counts, name) + 1)

    # the end

    def drain(self) -> float:
        self.faults.undo_all()
        started = time.monotonic()
        while time.monotonic() - started < self.args.settle_s:
            self.revive_workers()
            try:
                for job in self.queue.jobs([S.PAUSED], limit=1000):
                    with contextlib.suppress(TransitionNotAllowed):
                        self.queue.resume(job.id or 0, source="chaos")
                if self._all_settled():
                    break
            except DatabaseError:
                self.counts.extra["server_down_errors"] += 1
            time.sleep(0.5)
        return time.monotonic() - started

    def _warming_up(self) -> bool:
        """Jobs wait but no worker runs one: the workers are (re)starting.

        Chaos paced by the clock would, on a slow machine, cancel the queue away before
        any worker ran a step; paced by the workers, it provokes the same races anywhere.
        """
        return not self.queue.jobs([S.PROCESSING], limit=1) and bool(
            self.queue.jobs([S.PENDING], limit=1)
        )

    def _all_settled(self) -> bool:
        return not unsettled(self.queue, self.parents)


def unsettled(queue: JobQueue, parents: Parents) -> list[int]:
    jobs = {job.id or 0: job for job in all_jobs(queue)}
    return [job_id for job_id, job in jobs.items() if is_stuck(job, jobs, parents)]


def all_jobs(queue: JobQueue) -> list[Job]:
    return queue.jobs(limit=1_000_000)


# --- the checks ------------------------------------------------------------------------------


def check(
    queue: JobQueue,
    submitted: list[int],
    ledger: Path,
    reference: Reference,
    parents: Parents,
    outages: list[tuple[float, float]] | None = None,
    replaced_at: list[float] | None = None,
    planted: list[int] | None = None,
    killed_workers: list[str] | None = None,
) -> dict[str, float]:
    """The figures (see `chaos_checks`); `EmptyLedger` when the workers recorded nothing.
    `outages`: when the store could not be written, `replaced_at`: when the database file
    was replaced, `planted`: the jobs planted a hang (the fault driver's record),
    `killed_workers`: the identities of the workers the driver SIGKILLed."""
    jobs = {job.id or 0: job for job in all_jobs(queue)}
    timelines = {job_id: queue.timeline(job_id) for job_id in submitted if job_id in jobs}
    timing = Timing(
        CHAOS_SETTINGS["heartbeat_timeout_s"], HEARTBEAT_INTERVAL_S, outages=outages or [],
        replaced_at=replaced_at or [], planted=planted or [],
        killed_workers=frozenset(killed_workers or ()),
    )  # fmt: skip
    results = figures(
        submitted, jobs, timelines, read_ledger(ledger), ledger, reference, parents,
        checkpoint_interval_s=CHAOS_SETTINGS["checkpoint_interval_s"], timing=timing,
    )  # fmt: skip
    interval = {"checkpoint_interval_s": CHAOS_SETTINGS["checkpoint_interval_s"]}
    return results | interval | {"orphaned_children": orphaned_children(queue.db)}


class References:
    """Images of uninterrupted runs, made on demand in this process, one per job.

    With the workers' torch thread count: on CPU, another count sums in another order,
    and 2 of 8 images of one run differed by 1 for that reason alone."""

    def __init__(self, runner: str, folder: Path, torch_threads: int) -> None:
        self.runner_kind = runner
        self.folder = folder
        self.torch_threads = torch_threads
        self._runner: RunnerLike | None = None

    def __call__(self, job: Job) -> Path:
        image = self.folder / f"{job.id:06d}-{job.seed}.png"
        if not image.exists():
            self.runner.run(
                params_of(job), output_path=image,
                checkpoint_path=self.folder / f"{job.id}.ckpt", on_step=_continue,
            )  # fmt: skip
        return image

    @property
    def runner(self) -> RunnerLike:
        if self._runner is None:
            from app.engine.workers.worker import default_runner
            from app.testing.scripted_runner import ScriptedRunner

            if self.runner_kind == "tiny":
                import torch  # only for the real runner: the scripted one has no threads

                torch.set_num_threads(self.torch_threads)
            self._runner = default_runner() if self.runner_kind == "tiny" else ScriptedRunner()
        return self._runner


def _continue(progress: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


def leftover_workers(folders: list[Path], wait_s: float = ORPHAN_EXIT_S) -> int:
    """Worker processes still alive after the end, once orphans had `wait_s` to exit.

    Orphans of killed supervisors finish their step, see their parent gone and exit; on a
    busy machine that takes a while, so this waits for it rather than counting too early.
    """
    deadline = time.monotonic() + wait_s
    while True:
        alive = 0
        for folder in folders:
            remove_stale_locks(folder, min_age_s=0)  # what is left is held by a live worker
            alive += len(list(folder.glob("*.lock"))) if folder.exists() else 0
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


# --- main ------------------------------------------------------------------------------------


def submit_jobs(
    queue: JobQueue,
    count: int,
    runner: str,
    rng: random.Random,
    parents: dict[int, list[int]],
    serial: int = 0,
    seed: int | None = None,
    priority: int = 0,
    work_s: float = 0.0,
) -> list[int]:
    """The jobs, a third of them chained after an earlier one (recorded in `parents`).

    Fake jobs carry their number (from `serial`) in the prompt, so no two are alike: the
    ledger tells two jobs of one id apart by their parameters. `seed`: all the same.
    `work_s`: CPU seconds each fake step computes (its sleep shortened to match)."""
    ids: list[int] = []
    for number in range(serial + 1, serial + count + 1):
        if runner == "tiny":
            params = GenerationParams(
                # Long enough (~1-2 s) that 200 jobs outlast the kills and the restarts.
                "a red circle",
                model=TINY_MODEL,
                steps=rng.randint(40, 80),
                width=64,
                height=64,
            )
        else:
            # 0.3-0.8 s: longer than a worker's progress writes are apart (0.25 s), so the
            # driver sees jobs mid-way, the only ones it kills.
            sleep_s = max(0.01, 0.05 - work_s)
            work = f" work={work_s}" if work_s else ""
            params = GenerationParams(
                f"a cat step={sleep_s}{work} number-{number}", model="fake",
                steps=rng.randint(6, 16),
            )  # fmt: skip
        if seed is not None:
            params = dataclasses.replace(params, seed=seed)
        after = [rng.choice(ids)] if ids and rng.random() < CHAINED_SHARE else []
        ids.append(queue.submit(params, source="chaos", parents=after, priority=priority))
        if after:
            parents[ids[-1]] = after
    return ids


def prepare_home(args: argparse.Namespace) -> Path:
    """The data folder, ready; `FaultRefused` if the disk fault cannot run on it safely."""
    home = Path(args.home or tempfile.mkdtemp(prefix="easel-chaos-")).resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ[paths.HOME_ENV] = str(home)  # for this driver and every process it starts
    ledger = home / LEDGER_FILE
    if FaultKind.DISK in args.faults:
        check_fillable(home)
        # Off the disk that fills up: the measuring must not fail with what it measures.
        ledger = Path(tempfile.mkdtemp(prefix="easel-chaos-ledger-")) / LEDGER_FILE
    os.environ[LEDGER_ENV] = str(ledger)
    if args.runner == "tiny" and not (paths.models_dir() / TINY_MODEL).exists():
        from app.testing.tiny.unet import write_tiny_pipeline

        write_tiny_pipeline(paths.models_dir() / TINY_MODEL)
    return home


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-kills", type=int, default=20)
    parser.add_argument("--supervisor-kills", type=int, default=5)
    parser.add_argument("--runner", choices=["tiny", "fake"], default="tiny")
    parser.add_argument(
        "--interval", type=float, default=0.2,
        help="seconds between looks at the workers' progress (the actions follow progress)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--home", help="data folder (default: a new temporary one)")
    parser.add_argument(
        "--faults", type=parse_faults, default=frozenset(),
        help="fault kinds to add, comma-separated: disk, lock, stop, ckpt, "
        "skew, stall, db-outage, replace-db, contention",
    )  # fmt: skip
    parser.add_argument(
        "--each-fault", type=int, default=1,
        help="the chaos goes on until each fault kind was put in place this many times",
    )  # fmt: skip
    parser.add_argument(
        "--settle-s", type=float, default=SETTLE_TIMEOUT_S,
        help="the longest the chaos and then the drain may each last",
    )  # fmt: skip
    parser.add_argument("--lock-seconds", type=float, default=20.0)
    parser.add_argument("--disk-seconds", type=float, default=4.0)
    parser.add_argument(
        "--db", help="a PostgreSQL URL (scripts/pg_test_server.sh start): run on that server"
    )
    parser.add_argument("--machines", type=int, default=4, help="--db: worker processes")
    parser.add_argument(
        "--server-restarts", type=int, default=3, help="--db: restarts of the server"
    )
    parser.add_argument("--supervise", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--machine", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.supervise:
        supervise(args.runner, args.workers)
        return 0
    if args.machine:
        return machine(args.runner, args.machine, args.workers)
    started = time.monotonic()
    server: PrivateServer | None = None
    try:
        check_faults(args)
        home = prepare_home(args)
        if args.faults & SERVER_ONLY and not args.db:
            server = PrivateServer()
            os.environ.update(server.environment)  # every restart reaches this server only
            args.db = server.start()
    except (FaultRefused, NoServer) as refused:
        print(f"chaos: {refused}", file=sys.stderr)
        return 2
    try:
        if not args.db:
            return run_chaos(args, home, started)
        with scratch_schema(args.db) as url:
            os.environ[DB_ENV] = url  # for this driver and every machine it starts
            return run_chaos(args, home, started, server)
    except DatabaseError as error:
        print(f"chaos: {error}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.remove()


def check_faults(args: argparse.Namespace) -> None:
    """`FaultRefused` for faults this run's store cannot have."""
    check_combination(args.faults)
    if args.db and args.faults & SQLITE_ONLY:
        names = ", ".join(sorted(args.faults & SQLITE_ONLY))
        raise FaultRefused(f"{names} work on the SQLite store only, not with --db")
    if args.db and FaultKind.DB_OUTAGE in args.faults:
        # Another server may serve others (the test suite's does): only our own is stopped.
        raise FaultRefused(
            "db-outage stops the server: leave out --db, and the benchmark starts its own"
        )


def run_chaos(
    args: argparse.Namespace, home: Path, started: float, server: PrivateServer | None = None
) -> int:
    chaos = Chaos(args, home, server)
    chaos.submit(args.jobs)
    try:
        chaos.run()
    finally:
        chaos.faults.undo_all()  # never leave a frozen worker, a full disk or a lock behind
    drain_s = chaos.drain()
    chaos.stop_workers()
    # First: orphans may still write their last step.
    leftover = leftover_workers(chaos.liveness_dirs())
    references = References(
        args.runner, Path(tempfile.mkdtemp(prefix="easel-chaos-ref-")),
        threads_per_worker(args.machines if args.db else args.workers),
    )  # fmt: skip
    try:
        results = check(
            chaos.queue, chaos.submitted, ledger_path(), references, chaos.parents,
            chaos.faults.outages, chaos.faults.replaced_at, chaos.faults.planted,
            chaos.killed_workers,
        )  # fmt: skip
    except EmptyLedger as empty:
        print(f"chaos: {empty}", file=sys.stderr)
        return 1
    finally:
        chaos.queue.db.dispose()
    counts = chaos.counts
    results |= {
        "chained_jobs": len(chaos.parents),
        "worker_kills": counts.worker_kills, "supervisor_kills": counts.supervisor_kills,
        "cancels": counts.cancels, "pauses": counts.pauses, "resumes": counts.resumes,
        "leftover_workers": leftover, "supervisor_crashes": counts.extra["supervisor_crashes"],
        "driver_refused": counts.extra["driver_refused"],
        **{f"faults_{kind.value}": chaos.faults.injected[kind] for kind in sorted(args.faults)},
        "store_outages": len(chaos.faults.outages),
        "forgotten_by_restore": counts.extra["forgotten_by_restore"],
    }  # fmt: skip
    if args.db:
        results |= {
            "machines": args.machines, "server_restarts": counts.server_restarts,
            "machine_crashes": counts.extra["machine_crashes"],
            "machine_db_exits": counts.extra["machine_db_exits"],
            "machine_stuck_exits": counts.extra["machine_stuck_exits"],
            "restarted_after_replace": counts.extra["restarted_after_replace"],
            "server_down_errors": counts.extra["server_down_errors"],
        }  # fmt: skip
    missed = chaos.missed()  # kill and fault targets the chaos did not reach
    for name, value in results.items():
        print(f"{name}: {value}")
    print(f"missed: {missed}")
    print(f"drain_s: {drain_s:.1f}")
    print(f"total_s: {time.monotonic() - started:.1f}")
    print(f"home: {home}")
    broken = any(results[name] for name in FAULT_FIGURES)
    expected_jobs = len(chaos.submitted)
    return 1 if broken or missed or results["jobs"] != expected_jobs else 0


if __name__ == "__main__":
    sys.exit(main())
