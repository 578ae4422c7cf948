"""`python -m app <command>`: the command line. No command opens the window."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from app import __version__
from app.engine import paths
from app.engine.logs import configure_logging
from app.engine.paths import HOME_ENV
from app.engine.settings import DB_ENV
from app.errors import internal_error

log = logging.getLogger(__name__)

# Each command module (app.cli.<name>) adds its sub-commands; a sub-command stores its
# handler as `run`. They are imported only when a command is given: they reach the store,
# numpy and PIL, a second or more of imports that opening the window does not wait for.
COMMAND_MODULES: tuple[str, ...] = (
    "jobs",
    "worker",
    "db",
    "graph",  # after jobs: it extends `submit`
    "inpaint",  # after graph: it extends `submit` again (masks)
    "groups",  # after graph: batches and wildcards on `submit`, `retry` of a cell
    "edit",  # after groups: `submit --edit-image` goes before submit's own run
    "history",
    "export",
    "serve",
)
EXIT_BUG = 1
EXIT_REFUSED = 2  # as argparse exits on a bad argument
EXIT_BROKEN_PIPE = 141  # what a shell reports for a program ended by SIGPIPE (128 + 13)
HOME_HELP = f"data folder (overrides ${HOME_ENV} and the default)"


def build_parser() -> argparse.ArgumentParser:
    parser = _options_parser()
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        import_module(f"app.cli.{name}").add_commands(commands)
    _accept_home_after_the_command(commands)
    return parser


def _options_parser(*, add_help: bool = True) -> argparse.ArgumentParser:
    """The options before any command: all that opening the window takes."""
    parser = argparse.ArgumentParser(
        prog="python -m app",
        description="Easel: local image generation where no job ever vanishes. "
        "With no command, opens the window.",
        add_help=add_help,
    )
    parser.add_argument("--version", action="version", version=f"Easel {__version__}")
    parser.add_argument("--home", metavar="DIR", help=HOME_HELP)
    parser.add_argument(
        "--db",
        metavar="URL",
        help=f"job database: a postgresql:// URL shared by several machines (overrides ${DB_ENV})",
    )
    return parser


def _accept_home_after_the_command(commands: argparse._SubParsersAction) -> None:
    """`--home DIR` after the command too (`jobs --home DIR`), at any depth (`db restore`).

    SUPPRESS: a command that is not given `--home` leaves the one before it in place."""
    for parser in set(commands.choices.values()):
        parser.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS, help=HOME_HELP)
        for action in parser._subparsers._group_actions if parser._subparsers else ():
            if isinstance(action, argparse._SubParsersAction):
                _accept_home_after_the_command(action)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.home is not None:
        if not args.home.strip():  # never fall back to the default folder behind the user's back
            build_parser().error("--home needs a folder, not an empty name")  # the full usage
        os.environ[HOME_ENV] = os.path.abspath(args.home)
    if args.db:
        os.environ[DB_ENV] = args.db  # also reaches worker processes, which inherit it
    try:
        paths.data_dir()  # before the log file, which lives in it
    except paths.DataFolderUnusable as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_REFUSED
    if args.command is None:
        return _open_window()
    log_file = configure_logging("cli")
    handler: Callable[[argparse.Namespace], int] = args.run
    try:
        return handler(args)
    except BrokenPipeError:
        return _reader_went_away()
    except Exception as error:  # a bug: the traceback goes to the log, one line to the user
        log.exception("command %s failed", args.command)
        print(f"error: {internal_error(error, log_file)}", file=sys.stderr)
        return EXIT_BUG


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; the command modules are imported only when there is more than the
    options that open the window (`--home`, `--db`). `-h` asks the full parser."""
    options = _options_parser(add_help=False)
    args, rest = options.parse_known_args(argv)
    if not rest:
        args.command = None
        return args
    return build_parser().parse_args(argv)


def _reader_went_away() -> int:
    """`jobs | head`: the reader closed the pipe; stop quietly (no traceback at exit either)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the flush at interpreter exit must not fail again
    return EXIT_BROKEN_PIPE


def _open_window() -> int:
    from app.ui.main import run_gui  # Qt is only imported when the window is wanted

    return run_gui(sys.argv[:1])
