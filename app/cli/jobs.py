"""Queue commands: submit, jobs, show, cancel, pause, resume, retry, rerun."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

from app.cli import arguments
from app.cli.filters import add_filter_arguments, filter_from_args
from app.cli.terminal import printable
from app.engine.generation.files.registry import step_cache_families
from app.engine.generation.prompts.few_step import job_defaults, schedule_text
from app.engine.generation.request_checks import check_runnable
from app.engine.history.search import search
from app.engine.jobs.notes import merged, notes_of
from app.engine.jobs.params import (
    DEFAULT_FPS,
    DEFAULT_FRAMES,
    DEFAULT_MODEL,
    DEFAULT_SCHEDULER,
    KIND_VIDEO,
    SCHEDULERS,
    SPEED_OFF,
    SPEED_THRESHOLDS,
    GenerationParams,
    InvalidParameters,
    decode_control,
    decode_reference,
    parse_size,
)
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.settings import load_settings, queue_is_shared
from app.engine.store.opening import OpenFor, open_queue
from app.errors import DatabaseError, UserError
from app.models.tables import Job, JobNote, JobTransition

EXIT_REFUSED = 2  # the request was refused as given (bad input, no such job, not allowed)
EXIT_STORE = 1  # the database or its disk (locked, full, read-only, damaged)
DEFAULT_LIMIT = 50


def add_commands(commands: argparse._SubParsersAction) -> None:
    submit = commands.add_parser("submit", help="queue a generation; prints the new job id")
    add_generation_arguments(submit)  # `graph` adds img2img and --after, and runs it

    listing = commands.add_parser("jobs", help="list jobs, newest first")
    listing.add_argument("--status", type=_status, action="append",
                         help="only jobs in this status (repeat for several)")  # fmt: skip
    add_filter_arguments(listing)
    shown = listing.add_mutually_exclusive_group()
    shown.add_argument("--limit", type=arguments.at_least_one, default=DEFAULT_LIMIT, metavar="N",
                       help=f"show the newest N jobs (default {DEFAULT_LIMIT})")  # fmt: skip
    shown.add_argument("--all", action="store_true", help="show every job")
    listing.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    listing.set_defaults(run=with_queue(_jobs, OpenFor.READING))

    show = commands.add_parser("show", help="a job and its timeline")
    show.add_argument("job_id", type=arguments.job_id, metavar="ID")
    show.add_argument("--json", action="store_true", help="one JSON object, for scripts")
    show.set_defaults(run=with_queue(_show, OpenFor.READING))

    for name, action in (
        ("cancel", JobQueue.cancel),
        ("pause", JobQueue.pause),
        ("resume", JobQueue.resume),
        ("retry", JobQueue.retry),
    ):
        sub = commands.add_parser(name, help=f"{name} a job")
        sub.add_argument("job_id", type=arguments.job_id, metavar="ID")
        sub.set_defaults(run=with_queue(_request(action)))

    rerun = commands.add_parser("rerun", help="queue a finished job again; prints the new id")
    rerun.add_argument("job_id", type=arguments.job_id, metavar="ID")
    rerun.set_defaults(run=with_queue(_rerun))


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", help="what to draw")
    parser.add_argument("--negative", default="", help="what to keep out of the image")
    # A few-step LoRA in the prompt (or a few-step model) sets steps, CFG and sampler where
    # these are not given.
    parser.add_argument("--steps", type=int, default=GenerationParams.steps, action=Given)
    parser.add_argument("--cfg", type=float, default=GenerationParams.cfg, action=Given)
    parser.add_argument("--seed", type=int, default=GenerationParams.seed, help="-1: random")
    default_size = f"{GenerationParams.width}x{GenerationParams.height}"
    parser.add_argument("--size", default=default_size, help="WIDTHxHEIGHT, multiples of 8")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument(
        "--scheduler", default=DEFAULT_SCHEDULER, action=Given,
        help=f"one of: {', '.join(SCHEDULERS)}",
    )  # fmt: skip
    parser.add_argument(
        "--cache", default=SPEED_OFF, metavar="SPEED",
        help=f"step caching (First Block Cache), one of: {', '.join(SPEED_THRESHOLDS)}; "
        f"faster, with a small loss of detail ({step_cache_families()} models)",
    )  # fmt: skip
    parser.add_argument(
        "--cache-threshold", type=float, default=0.0, metavar="T",
        help="with --cache: the cache's threshold instead of the setting's own "
        f"({', '.join(f'{k} {v:g}' for k, v in SPEED_THRESHOLDS.items() if v)})",
    )  # fmt: skip
    parser.add_argument(
        "--compile", action="store_true",
        help="run the model compiled (torch.compile): faster steps after a one-off compile "
        "per worker and model (kept in the data folder's compile-cache)",
    )  # fmt: skip
    video = parser.add_argument_group("video (a video model such as Wan 2.1)")
    video.add_argument("--video", action="store_true", help="draw a clip: an MP4")
    video.add_argument(
        "--frames", type=int, metavar="N",
        help=f"with --video: the clip's frames (Wan: 4k+1; default {DEFAULT_FRAMES})",
    )  # fmt: skip
    video.add_argument(
        "--fps", type=int, metavar="F",
        help=f"with --video: frames a second (default {DEFAULT_FPS})",
    )  # fmt: skip


class Given(argparse.Action):
    """Stores the value and notes that it was given (`args.given`): a few-step LoRA's
    defaults never replace what the artist typed."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, *_: Any) -> None:
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


def params_from_args(args: argparse.Namespace, *, check: bool = True) -> GenerationParams:
    """The request on the command line, checked before anything is stored: parameters, and
    (`check`) that the model exists where a worker will look and runs them (files only: no
    torch here); without `check`, the caller checks the model once the request is whole.
    A few-step LoRA's steps, CFG and schedule fill what was not given (said on stderr)."""
    params = few_step_defaults(args, _params_as_given(args))
    if check:
        check_model(params)
    return params


def few_step_defaults(args: argparse.Namespace, params: GenerationParams) -> GenerationParams:
    """`params` with a few-step LoRA's or model's (a distilled LTX-Video's) settings where
    `args` gave none, said on stderr."""
    search = load_settings().model_search_path()
    applied = job_defaults(params, getattr(args, "given", ()), search, names_only=queue_is_shared())
    if note := applied.note():
        print(f"note: {printable(note)}", file=sys.stderr)
    return applied.params.validated()


def _params_as_given(args: argparse.Namespace) -> GenerationParams:
    width, height = parse_size(args.size)
    return GenerationParams(
        prompt=args.prompt, negative_prompt=args.negative, model=args.model,
        scheduler=args.scheduler, steps=args.steps, cfg=args.cfg,
        width=width, height=height, seed=args.seed,
        speed=getattr(args, "cache", SPEED_OFF),
        speed_threshold=getattr(args, "cache_threshold", 0.0),
        compile=getattr(args, "compile", False),
        **_video_args(args),
    ).validated()  # fmt: skip


def _video_args(args: argparse.Namespace) -> dict[str, Any]:
    """`kind`, `frames` and `fps` of a --video request; nothing for an image."""
    frames, fps = getattr(args, "frames", None), getattr(args, "fps", None)
    if not getattr(args, "video", False):
        if frames is not None or fps is not None:
            raise InvalidParameters("--frames and --fps need --video")
        return {}
    return {
        "kind": KIND_VIDEO,
        "frames": DEFAULT_FRAMES if frames is None else frames,
        "fps": DEFAULT_FPS if fps is None else fps,
    }


def check_model(params: GenerationParams) -> None:
    """What a worker would refuse (model, size, LoRAs), as a UserError: files only, no torch.
    A model path is this machine's user's to give, except to a shared queue (names only)."""
    check_runnable(params, load_settings().model_search_path(), names_only=queue_is_shared())


Handler = Callable[[argparse.Namespace], int]


def with_queue(
    handler: Callable[[argparse.Namespace, JobQueue], int],
    purpose: OpenFor = OpenFor.REQUESTS,
) -> Handler:
    """Run a command on the user's queue; errors the user can act on become one line."""

    def run(args: argparse.Namespace) -> int:
        try:
            queue = open_queue(purpose=purpose)
            try:
                return handler(args, queue)
            finally:
                queue.db.dispose()
        except UserError as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_STORE if isinstance(error, DatabaseError) else EXIT_REFUSED

    return run


def _jobs(args: argparse.Namespace, queue: JobQueue) -> int:
    statuses = args.status or None
    limit = None if args.all else args.limit
    job_filter = filter_from_args(args)
    if not job_filter.is_everything:
        return _found(args, search(queue, job_filter, limit=limit))
    jobs = queue.jobs(statuses, limit=limit)
    if args.json:
        print(json.dumps([job_record(job) for job in jobs], indent=1))
    for job in [] if args.json else jobs:
        print(job_line(job))
    counts = queue.count_by_status()
    total = sum(n for status, n in counts.items() if statuses is None or status in statuses)
    if len(jobs) < total:
        # On stderr: a note for people, never mixed into what a script reads.
        print(f"(the newest {len(jobs)} of {total} jobs; --limit N or --all for more)",
              file=sys.stderr)  # fmt: skip
    return 0


def _found(args: argparse.Namespace, jobs: list[Job]) -> int:
    if args.json:
        print(json.dumps([job_record(job) for job in jobs], indent=1))
    for job in [] if args.json else jobs:
        print(job_line(job))
    return 0


def _show(args: argparse.Namespace, queue: JobQueue) -> int:
    job = queue.get(args.job_id)
    timeline = queue.timeline(job.id or 0)
    notes = notes_of(queue.db, job.id or 0)  # what happened beside the transitions
    if args.json:
        record = {**job_record(job), "timeline": [t.model_dump() for t in timeline],
                  "notes": [note.model_dump() for note in notes]}  # fmt: skip
        print(json.dumps(record, indent=1))
        return 0
    print(job_line(job))
    for label, value in _job_details(job):
        print(f"  {label:<11} {printable(value)}")
    print("timeline:")
    for row in merged(timeline, notes):
        print("  " + (note_line(row) if isinstance(row, JobNote) else transition_line(row)))
    return 0


def job_record(job: Job) -> dict[str, Any]:
    """A job as plain JSON values (times stay Unix seconds, like the database)."""
    return job.model_dump()


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
    star = "*" if job.starred else " "
    created = _clock(job.created_at)
    return f"{job.id:>6}{star} {job.status:<10} {progress:>7}  {created}  {printable(job.prompt)}"


def _speed_text(job: Job) -> str:
    """Step caching, if the job asked for it: the setting and the threshold it runs at."""
    if job.speed == SPEED_OFF:
        return ""
    threshold = job.speed_threshold or SPEED_THRESHOLDS.get(job.speed, 0.0)
    return f"{job.speed} (First Block Cache, threshold {threshold:g})"


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
        ("template", job.prompt_template), ("upscaler", job.upscaler),
        ("group", _group_text(job)),
        ("speed", _speed_text(job)),
        ("compile", "torch.compile" if job.compile else ""),
        ("schedule", schedule_text(job.scheduler_config) if job.scheduler_config else ""),
        ("video", f"{job.frames} frames at {job.fps} fps" if job.kind == KIND_VIDEO else ""),
    ]  # fmt: skip
    details += [(label, value) for label, value in optional if value]
    for index, layer in enumerate(decode_control(job.control)):
        details.append((
            f"control {index}",
            f"{layer.module} by {layer.model}, weight {layer.weight:g}, steps "
            f"{layer.start:g}-{layer.end:g}"
            + (f", type {layer.control_type}" if layer.control_type else "")
            + f" (image {layer.image.removeprefix('upload:')[:12]})",
        ))  # fmt: skip
    for index, reference in enumerate(decode_reference(job.reference)):
        image = reference.image.removeprefix("upload:")[:12]
        details.append(
            (
                f"reference {index}",
                f"{reference.model}, weight {reference.weight:g} (image {image})",
            )
        )
    return details


def _group_text(job: Job) -> str:
    if job.group_id is None:
        return ""
    where = "its grid" if job.group_cell is None else f"cell {job.group_cell}"
    return f"{job.group_id} ({where})"


def transition_line(t: JobTransition) -> str:
    source = t.from_status or "(new)"
    text = (
        f"{_clock(t.at)}  #{t.attempt}  {source:>10} -> {t.to_status:<10} {t.event:<8} {t.source}"
    )
    return f"{text}  {printable(t.message)}" if t.message else text


def note_line(note: JobNote) -> str:
    """A note in the timeline, aligned with the transitions; it changes no status."""
    columns = f"{'':>10}    {'note':<19}"  # as wide as "(from) -> (to) (event)"
    text = f"{_clock(note.at)}  #{note.attempt}  {columns} {note.source}"
    return f"{text}  {printable(note.message)}"


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")
