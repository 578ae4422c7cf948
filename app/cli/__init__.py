"""`python -m app <command>`: the command line. No command opens the window."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from app import __version__
from app.cli import graph, jobs, worker
from app.engine.logs import configure_logging
from app.engine.paths import HOME_ENV

# Each command module adds its sub-commands; a sub-command stores its handler as `run`.
COMMAND_MODULES: list[Callable[[argparse._SubParsersAction], None]] = [
    jobs.add_commands,
    worker.add_commands,
    graph.add_commands,  # after jobs: it extends `submit`
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m app",
        description="Easel: local image generation where no job ever vanishes. "
        "With no command, opens the window.",
    )
    parser.add_argument("--version", action="version", version=f"Easel {__version__}")
    parser.add_argument(
        "--home", metavar="DIR", help=f"data folder (overrides ${HOME_ENV} and the default)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add_commands in COMMAND_MODULES:
        add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.home:
        os.environ[HOME_ENV] = os.path.abspath(args.home)
    if args.command is None:
        return _open_window()
    configure_logging("cli")
    handler: Callable[[argparse.Namespace], int] = args.run
    return handler(args)


def _open_window() -> int:
    from app.ui.main import run_gui  # Qt is only imported when the window is wanted

    return run_gui(sys.argv[:1])
