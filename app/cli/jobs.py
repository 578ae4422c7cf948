"""Queue commands: submit, jobs, show, cancel, pause, resume, retry, rerun."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import datetime

from app.engine.params import (
    DEFAULT_MODEL,
    DEFAULT_SCHEDULER,
    SCHEDULERS,
    GenerationParams,
    InvalidParameters,
    parse_size,
)
from app.engine.queue import JobNotFound, JobQueue, RequestRefused, open_queue
from app.engine.states import JobStatus, TransitionNotAllowed
from app.models.db import DatabaseError
from app.models.tables import Job, JobTransition

# Errors a user can act on: print the message, exit non-zero, no traceback.
USER_ERRORS = (InvalidParameters, TransitionNotAllowed, JobNotFound, RequestRefused, DatabaseError)


def add_commands(commands: argparse._SubParsersAction) -> None:
    submit = commands.add_parser("submit", help="queue a generation; prints the new job id")
    add_generation_arguments(submit)
    submit.set_defaults(run=with_queue(_submit))

    listing = commands.add_parser("jobs", help="list jobs, newest first")
    listing.add_argument("--status", type=_status, help="only jobs in this status")
    listing.add_argument("--limit", type=int, default=50)
    listing.set_defaults(run=with_queue(_jobs))

    show = commands.add_parser("show", help="a job and its timeline")
    show.add_argument("job_id", type=int, metavar="ID")
    show.set_defaults(run=with_queue(_show))

    for name, action in (
        ("cancel", JobQueue.cancel),
        ("pause", JobQueue.pause),
        ("resume", JobQueue.resume),
        ("retry", JobQueue.retry),
    ):
        sub = commands.add_parser(name, help=f"{name} a job")
        sub.add_argument("job_id", type=int, metavar="ID")
        sub.set_defaults(run=with_queue(_request(action)))

    rerun = commands.add_parser("rerun", help="queue a finished job again; prints the new id")
    rerun.add_argument("job_id", type=int, metavar="ID")
    rerun.set_defaults(run=with_queue(_rerun))


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", help="what to draw")
    parser.add_argument("--negative", default="", help="what to keep out of the image")
    parser.add_argument("--steps", type=int, default=GenerationParams.steps)
    parser.add_argument("--cfg", type=float, default=GenerationParams.cfg)
    parser.add_argument("--seed", type=int, default=GenerationParams.seed, help="-1: random")
    default_size = f"{GenerationParams.width}x{GenerationParams.height}"
    parser.add_argument("--size", default=default_size, help="WIDTHxHEIGHT, multiples of 8")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument(
        "--scheduler", default=DEFAULT_SCHEDULER, help=f"one of: {', '.join(SCHEDULERS)}"
    )


def params_from_args(args: argparse.Namespace) -> GenerationParams:
    width, height = parse_size(args.size)
    return GenerationParams(
        prompt=args.prompt, negative_prompt=args.negative, model=args.model,
        scheduler=args.scheduler, steps=args.steps, cfg=args.cfg,
        width=width, height=height, seed=args.seed,
    ).validated()  # fmt: skip


Handler = Callable[[argparse.Namespace], int]


def with_queue(handler: Callable[[argparse.Namespace, JobQueue], int]) -> Handler:
    """Run a command on the user's queue; errors the user can act on become one line."""

    def run(args: argparse.Namespace) -> int:
        try:
            queue = open_queue()
            try:
                return handler(args, queue)
            finally:
                queue.db.dispose()
        except USER_ERRORS as error:
            print(f"error: {error}", file=sys.stderr)
            return 2

    return run


def _submit(args: argparse.Namespace, queue: JobQueue) -> int:
    params = params_from_args(args)
    print(queue.submit(params, source="cli"))
    return 0


def _jobs(args: argparse.Namespace, queue: JobQueue) -> int:
    statuses = [args.status] if args.status else None
    for job in queue.jobs(statuses, limit=args.limit):
        print(job_line(job))
    return 0


def _show(args: argparse.Namespace, queue: JobQueue) -> int:
    job = queue.get(args.job_id)
    print(job_line(job))
    for label, value in _job_details(job):
        print(f"  {label:<11} {value}")
    print("timeline:")
    for transition in queue.timeline(job.id or 0):
        print("  " + transition_line(transition))
    return 0


def _request(action: Callable[..., object]) -> Callable[[argparse.Namespace, JobQueue], int]:
    def run(args: argparse.Namespace, queue: JobQueue) -> int:
        action(queue, args.job_id, source="cli")
        print(job_line(queue.get(args.job_id)))
        return 0

    return run


def _rerun(args: argparse.Namespace, queue: JobQueue) -> int:
    print(queue.rerun(args.job_id, source="cli"))
    return 0


def _status(text: str) -> JobStatus:
    try:
        return JobStatus(text.upper())
    except ValueError:
        known = ", ".join(s.value for s in JobStatus)
        raise argparse.ArgumentTypeError(f"unknown status {text!r} (known: {known})") from None


def job_line(job: Job) -> str:
    progress = f"{job.progress_step}/{job.progress_total}"
    return f"{job.id:>6}  {job.status:<10} {progress:>7}  {_clock(job.created_at)}  {job.prompt}"


def _job_details(job: Job) -> list[tuple[str, object]]:
    details: list[tuple[str, object]] = [
        ("model", f"{job.model}, {job.scheduler}, {job.steps} steps, CFG {job.cfg:g}"),
        ("size", f"{job.width}x{job.height}, seed {job.seed}"),
        (
            "attempt",
            f"{job.attempt} of {job.max_attempts}" + (", given up" if job.given_up else ""),
        ),
    ]
    optional = [
        ("negative", job.negative_prompt), ("output", job.output_path), ("error", job.error),
        ("checkpoint", job.checkpoint_path), ("re-run of", job.rerun_of),
    ]  # fmt: skip
    return details + [(label, value) for label, value in optional if value]


def transition_line(t: JobTransition) -> str:
    source = t.from_status or "(new)"
    text = (
        f"{_clock(t.at)}  #{t.attempt}  {source:>10} -> {t.to_status:<10} {t.event:<8} {t.source}"
    )
    return f"{text}  {t.message}" if t.message else text


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")
