"""Worker commands: worker (headless), workers (list, drain, stop), generate, recover."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import FrameType

from app.cli.graph import (
    add_img2img_arguments,
    add_last_image_argument,
    last_image_png,
    request_from_args,
)
from app.cli.jobs import add_generation_arguments, with_queue
from app.engine.generation.device import DEVICE_ENV, device_choice
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.retry import RetryPolicy, is_settled
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.states import JobStatus
from app.engine.logs import configure_logging, log_path
from app.engine.settings import Settings, load_settings
from app.engine.store.opening import OpenFor
from app.engine.store.stored_files import export_output
from app.engine.workers.headless import WorkerCannotStart as HeadlessCannotStart
from app.engine.workers.headless import run_headless
from app.engine.workers.messages import MessageKind, WorkerMessage
from app.engine.workers.recovery import RecoveryReport, recover_when_unlocked
from app.engine.workers.roster import list_workers, request_workers
from app.engine.workers.supervisor import Supervisor
from app.engine.workers.worker import WorkerConfig, database_file, default_liveness_dir
from app.engine.workers.worker_states import (
    FROM_COMMAND_LINE,
    StartedBy,
    WorkerRequest,
    WorkerSummary,
)
from app.errors import BadInput
from app.models.tables import Job

POLL_S = 0.1
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_START_FAILURES = 3  # every worker died before it was ready this many times in a row
EXIT_FAILED, EXIT_INTERRUPTED = 1, 130


def add_commands(commands: argparse._SubParsersAction) -> None:
    worker = commands.add_parser(
        "worker", help="run a headless worker: claim and run jobs until stopped (SIGTERM pauses)"
    )
    worker.add_argument("--until-idle", action="store_true", help="exit when no job is pending")
    worker.add_argument("--name", help="this machine's name in the queue (default: the host name)")
    worker.add_argument("--device", help="cpu, mps, cuda or cuda:N (default: the fastest)")
    worker.set_defaults(run=with_queue(_worker, OpenFor.HEADLESS))

    generate = commands.add_parser(
        "generate", help="generate one image now; prints its path last (Ctrl+C cancels)"
    )
    add_generation_arguments(generate)
    add_img2img_arguments(generate)  # as `submit` has them
    add_last_image_argument(generate)
    generate.add_argument("--out", metavar="DIR", help="folder for the image")
    generate.set_defaults(run=with_queue(_generate))

    workers = commands.add_parser(
        "workers", help="list the worker processes of every machine; drain or stop one"
    )
    workers.add_argument("--json", action="store_true", help="print JSON")
    workers.set_defaults(run=with_queue(_workers, OpenFor.READING))
    asks = workers.add_subparsers(dest="ask", metavar="ACTION")
    for request, what in (
        (WorkerRequest.DRAIN, "finish its job in hand, then exit"),
        (WorkerRequest.STOP, "pause its job in hand (it resumes later), then exit"),
    ):
        ask = asks.add_parser(request.value, help=f"ask a worker to {what}")
        ask.add_argument(
            "target", metavar="NAME|ID", help="a machine name (all its workers) or a worker id"
        )
        ask.set_defaults(run=with_queue(_ask(request)), request=request)

    recovery = commands.add_parser(
        "recover", help="settle jobs left running by workers that are gone; print what was done"
    )
    recovery.set_defaults(run=with_queue(_recover))


# --- worker ---------------------------------------------------------------------------------


def _worker(args: argparse.Namespace, queue: JobQueue) -> int:
    """A worker that also runs the watchdog and the retry policy: a fleet of these on several
    machines needs no window to recover its jobs (see `fleet`)."""
    if args.name is not None and not _NAME.fullmatch(args.name):
        raise BadInput(
            f"the worker name must be letters, digits, '.', '_' or '-', not {args.name!r}"
        )
    if args.device:
        os.environ[DEVICE_ENV] = device_choice(args.device).device  # checked before any work
    configure_logging("worker", echo=True)
    settings = load_settings()
    config = WorkerConfig.from_settings(
        settings, database_file(queue), until_idle=args.until_idle, name=args.name,
        started_by=StartedBy.WORKER_COMMAND,
    )  # fmt: skip
    try:
        # The worker runs in a child process, replaced when it gets stuck or dies.
        run_headless(
            queue, config, settings, on_message=_print_finished, prune_settings=load_settings
        )
    except HeadlessCannotStart as error:
        print(f"error: {error} (see {log_path('worker-0')})", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _print_finished(message: WorkerMessage) -> None:
    if message.kind is MessageKind.FINISHED:
        outcome = message.image_path or message.error or "stopped"
        print(f"job {message.job_id}: {outcome}", flush=True)


# --- workers ------------------------------------------------------------------------------


def _workers(args: argparse.Namespace, queue: JobQueue) -> int:
    found = list_workers(queue, timeout_s=load_settings().heartbeat_timeout_s)
    if args.json:
        print(json.dumps([asdict(worker) for worker in found], indent=1))
        return 0
    if not found:
        print("no workers yet: `python -m app worker` starts one", file=sys.stderr)
    for worker in found:
        print(worker_line(worker))
    return 0


def worker_line(worker: WorkerSummary) -> str:
    job = f"job {worker.current_job}" if worker.current_job is not None else "-"
    heard = f"{worker.last_heard_s:.0f} s ago" if worker.last_heard_s is not None else "-"
    asked = f" ({worker.request.value} asked)" if worker.request is not None else ""
    return (
        f"{worker.machine:<16} {worker.state.value + asked:<18} {job:<10} {heard:>10}  "
        f"{worker.jobs_done:>4} done  {worker.device or '-'}  {worker.model or '-'}  "
        f"{worker.worker_id}"
    )


def _ask(request: WorkerRequest) -> Callable[[argparse.Namespace, JobQueue], int]:
    def run(args: argparse.Namespace, queue: JobQueue) -> int:
        asked = request_workers(
            queue, args.target, request, requested_by=FROM_COMMAND_LINE,
            timeout_s=load_settings().heartbeat_timeout_s,
        )  # fmt: skip
        for worker in asked:
            print(f"{worker.worker_id}: {request.value} asked")
        return 0

    return run


# --- generate -------------------------------------------------------------------------------


def _generate(args: argparse.Namespace, queue: JobQueue) -> int:
    params, init_png = request_from_args(args)
    settings = load_settings()
    out = None
    if args.out:
        out = Path(args.out).expanduser().resolve()
        out.mkdir(parents=True, exist_ok=True)
    # The folder travels with the job: a GUI worker that claims it first writes there too.
    # Not on a shared queue, whose workers write only into their outputs folder (a peer's
    # row may name any folder): the image is copied into it here once done.
    copy_to = out if queue.shares_files else None
    job_id = queue.submit(
        params, max_attempts=settings.max_attempts, source="cli",
        output_dir=None if copy_to else out,
        inputs=RunInputs(init_image=init_png, last_image=last_image_png(args, params)),
    )  # fmt: skip
    try:
        _recover_at_launch(queue, settings)  # before its worker starts, waiting out a lock
    except KeyboardInterrupt:
        print(f"\nerror: interrupted; job {job_id} stays queued", file=sys.stderr)
        return EXIT_INTERRUPTED
    supervisor = Supervisor.for_app(
        queue, settings, workers=1, only_job=job_id, warm_model=params.model,
        recover_at_start=False, started_by=StartedBy.GENERATE,
    )  # fmt: skip
    try:
        job = _run_until_settled(supervisor, queue, job_id)
    except KeyboardInterrupt:
        print(f"\nerror: interrupted; job {job_id} is cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED
    except WorkerCannotStart as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    if copy_to is not None and job.status == JobStatus.SUCCESS:
        print(export_output(queue.db, job, copy_to, settings.outputs_path()))
        return 0
    return _report(job)


class WorkerCannotStart(Exception):
    pass


def _run_until_settled(supervisor: Supervisor, queue: JobQueue, job_id: int) -> Job:
    interrupts = []

    def on_sigint(_signum: int, _frame: FrameType | None) -> None:
        interrupts.append(time.monotonic())
        if len(interrupts) > 1:
            raise KeyboardInterrupt  # a second Ctrl+C: stop waiting (the cancel still holds)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        supervisor.start()
        cancelled = False
        while not _settled(job := queue.get(job_id)):
            for message in supervisor.poll():
                _show_progress(message)
            if supervisor.start_failures >= MAX_START_FAILURES:
                raise WorkerCannotStart(
                    f"the worker process failed to start {supervisor.start_failures} times "
                    f"(see {log_path('worker-0')}); job {job_id} stays queued"
                )
            if interrupts and not cancelled:
                queue.cancel(job_id, source="cli", message="Ctrl+C")
                cancelled = True
            time.sleep(POLL_S)
        return job
    finally:
        supervisor.shutdown(timeout=10.0)
        signal.signal(signal.SIGINT, previous)


def _settled(job: Job) -> bool:
    return is_settled(job) or job.status == JobStatus.PAUSED  # paused elsewhere: stop waiting


def _show_progress(message: WorkerMessage) -> None:
    if message.kind is MessageKind.PROGRESS and sys.stderr.isatty():
        print(f"\rstep {message.step}/{message.total}", end="", file=sys.stderr, flush=True)


def _report(job: Job) -> int:
    if sys.stderr.isatty():
        print(file=sys.stderr)
    if job.status == JobStatus.SUCCESS:
        print(job.output_path)
        return 0
    if job.status == JobStatus.CANCELLED:
        print(f"error: job {job.id} was cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED
    if job.status == JobStatus.PAUSED:
        print(f"error: job {job.id} was paused; `resume {job.id}` queues it again", file=sys.stderr)
        return EXIT_FAILED
    print(f"error: job {job.id} {job.status}: {job.error}", file=sys.stderr)
    return EXIT_FAILED


# --- recover --------------------------------------------------------------------------------


def _recover(args: argparse.Namespace, queue: JobQueue) -> int:
    try:
        report = _recover_at_launch(queue, load_settings())
    except KeyboardInterrupt:  # while it waited for the lock: each job settled is settled
        print("\nerror: interrupted; `recover` again settles the rest", file=sys.stderr)
        return EXIT_INTERRUPTED
    for line in report.lines() or ["nothing to recover"]:
        print(line)
    return 0


def _recover_at_launch(queue: JobQueue, settings: Settings) -> RecoveryReport:
    """Launch recovery (`recover`, `generate`), waiting out a lock held by another program."""
    return recover_when_unlocked(
        queue, liveness_dir=default_liveness_dir(),
        heartbeat_timeout_s=settings.heartbeat_timeout_s, policy=RetryPolicy(),
        on_lock_wait=_say_it_waits,
    )  # fmt: skip


def _say_it_waits(why: str) -> None:
    print(f"note: {why} (Ctrl+C stops waiting)", file=sys.stderr, flush=True)
