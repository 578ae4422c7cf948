"""`python -m app export N [--out DIR]`: a job's output into a folder on this machine; a
video job's clip as an animated GIF or WebP with `--gif` or `--webp`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli import arguments
from app.cli.jobs import EXIT_REFUSED, with_queue
from app.engine.jobs.params import KIND_VIDEO
from app.engine.jobs.queue import JobQueue
from app.engine.outputs.animation import write_animation
from app.engine.settings import load_settings
from app.engine.store.opening import OpenFor
from app.engine.store.stored_files import NoOutput, export_output, no_output_reason, output_bytes
from app.errors import BadInput, UserError


def add_commands(commands: argparse._SubParsersAction) -> None:
    exporting = commands.add_parser(
        "export",
        help="write a job's output (its file as it is, settings included) into a folder "
        "here, from this machine's file or the job database; prints its path",
    )
    exporting.add_argument("job_id", type=arguments.job_id, metavar="ID")
    exporting.add_argument(
        "--out", type=Path, metavar="DIR", help="folder (default: the current one)"
    )
    animation = exporting.add_mutually_exclusive_group()
    for suffix in (".gif", ".webp"):
        animation.add_argument(
            f"--{suffix[1:]}", nargs="?", const="", metavar="FILE",
            help=f"a video job: its clip as an animated {suffix[1:].upper()}, looping, at "
            f"the clip's fps (default FILE: the clip's name, ending {suffix}, in --out)",
        )  # fmt: skip
    exporting.set_defaults(run=with_queue(_export, OpenFor.READING))


def _export(args: argparse.Namespace, queue: JobQueue) -> int:
    folder: Path = args.out or Path.cwd()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        outputs = load_settings().outputs_path()  # a shared queue's output: only from here
        if args.gif is not None or args.webp is not None:
            path = _export_animation(args, queue, folder, outputs)
        else:
            path = export_output(queue.db, queue.get(args.job_id), folder, outputs)
    except OSError as error:
        print(f"error: cannot write into {folder}: {error.strerror or error}", file=sys.stderr)
        return EXIT_REFUSED
    print(path)
    return 0


def _export_animation(
    args: argparse.Namespace, queue: JobQueue, folder: Path, outputs: Path
) -> Path:
    """The video job's clip as the animation `--gif` or `--webp` asks for; refused in one
    sentence for an image job, a name of the other format, or a file already there."""
    suffix, named = (".gif", args.gif) if args.gif is not None else (".webp", args.webp)
    job = queue.get(args.job_id)
    if job.kind != KIND_VIDEO:
        raise BadInput(f"Job {job.id} made an image, not a clip: --{suffix[1:]} takes a video job")
    clip = output_bytes(queue.db, job, outputs)
    if clip is None:
        raise NoOutput(no_output_reason(job))
    clip_name = Path(job.output_path or str(job.id)).stem
    target = Path(named) if named else folder / f"{clip_name}{suffix}"
    if target.suffix.lower() != suffix:
        raise BadInput(f"--{suffix[1:]} writes a {suffix} file: name it {target.stem}{suffix}")
    if target.exists():
        raise UserError(f"{target} already exists; nothing was written")
    return write_animation(clip, target)
