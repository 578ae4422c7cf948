"""Database commands: `db copy --to URL` moves a local queue into a shared PostgreSQL."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.engine.paths import database_path
from app.models.db import DatabaseError, open_database
from app.models.postgres import copy_store, is_database_url, safe_url

EXIT_REFUSED = 2


def add_commands(commands: argparse._SubParsersAction) -> None:
    db = commands.add_parser("db", help="the job database: copy a local queue to PostgreSQL")
    actions = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    copy = actions.add_parser(
        "copy", help="copy this machine's SQLite queue, history included, into PostgreSQL"
    )
    copy.add_argument("--to", metavar="URL", required=True, help="postgresql://user@host/db")
    copy.add_argument(
        "--from", dest="source", metavar="FILE", help="SQLite file (default: the data folder's)"
    )
    copy.set_defaults(run=_copy)


def _copy(args: argparse.Namespace) -> int:
    source = Path(args.source) if args.source else database_path()
    if not is_database_url(args.to):
        return _refuse(f"--to needs a postgresql:// URL, not {args.to!r}")
    if not source.is_file():
        return _refuse(f"there is no job database at {source}")
    try:
        local = open_database(source)
        try:
            shared = open_database(args.to)
            try:
                jobs, rows = copy_store(local, shared)
            finally:
                shared.dispose()
        finally:
            local.dispose()
    except DatabaseError as error:
        return _refuse(str(error))
    print(f"copied {jobs} jobs and {rows} history rows from {source} to {safe_url(args.to)}")
    return 0


def _refuse(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_REFUSED
