"""`python -m app export N [--out DIR]`: a job's image into a folder on this machine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli import arguments
from app.cli.jobs import EXIT_REFUSED, with_queue
from app.engine.jobs.queue import JobQueue
from app.engine.settings import load_settings
from app.engine.store.opening import OpenFor
from app.engine.store.stored_files import export_output


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
    exporting.set_defaults(run=with_queue(_export, OpenFor.READING))


def _export(args: argparse.Namespace, queue: JobQueue) -> int:
    folder: Path = args.out or Path.cwd()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        outputs = load_settings().outputs_path()  # a shared queue's output: only from here
        path = export_output(queue.db, queue.get(args.job_id), folder, outputs)
    except OSError as error:
        print(f"error: cannot write into {folder}: {error.strerror or error}", file=sys.stderr)
        return EXIT_REFUSED
    print(path)
    return 0
