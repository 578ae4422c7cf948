"""Database commands: `db check`, `db backup`, `db restore [FILE]`, `db copy --to URL`,
which copies this machine's queue into a PostgreSQL database shared by several machines,
and `db password`, which keeps that database's password where libpq finds it."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from app.cli.jobs import EXIT_REFUSED, EXIT_STORE, with_queue
from app.engine import paths
from app.engine.crash import live_sessions
from app.engine.jobs.queue import JobQueue
from app.engine.settings import database_location
from app.engine.store.opening import OpenFor
from app.engine.store.shared_queue import Found, copy_local_queue, probe_queue, save_password
from app.engine.workers.liveness import held_locks
from app.engine.workers.worker import LIVENESS_FOLDER
from app.errors import DatabaseError
from app.models.backups import back_up, list_backups, restore_backup
from app.models.database_urls import is_database_url, safe_url


def add_commands(commands: argparse._SubParsersAction) -> None:
    db = commands.add_parser(
        "db", help="check, back up or restore the job database, or copy it to PostgreSQL"
    )
    actions = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="check the database for damage (read-only)")
    check.set_defaults(run=with_queue(_check, OpenFor.REQUESTS))
    backup = actions.add_parser("backup", help="back the database up now (backups/, last 3 kept)")
    backup.set_defaults(run=with_queue(_backup, OpenFor.REQUESTS))
    restore = actions.add_parser(
        "restore", help="replace a damaged database with a backup (close Easel first)"
    )
    restore.add_argument("file", nargs="?", type=Path, metavar="FILE",
                         help="the backup to restore (default: the newest)")  # fmt: skip
    restore.add_argument("--list", action="store_true", help="list the backups, newest last")
    restore.set_defaults(run=_restore)
    copy = actions.add_parser(
        "copy", help="copy this machine's SQLite queue, history included, into PostgreSQL"
    )
    copy.add_argument("--to", metavar="URL", required=True, help="postgresql://user@host/db")
    copy.add_argument(
        "--from", dest="source", type=Path, metavar="FILE",
        help="the SQLite file (default: the data folder's)",
    )  # fmt: skip
    copy.set_defaults(run=_copy)
    password = actions.add_parser(
        "password",
        help="try a password for the shared database (--db), then keep it in libpq's "
        "password file (asked for, or one line on stdin)",
    )
    password.set_defaults(run=_password)


def _check(_args: argparse.Namespace, queue: JobQueue) -> int:
    print(f"{queue.db.path}: no damage found")  # opening for requests ran the check
    return 0


def _backup(_args: argparse.Namespace, queue: JobQueue) -> int:
    print(back_up(queue.db))
    return 0


def _restore(args: argparse.Namespace) -> int:
    database = paths.database_path()
    if args.list:
        for backup in list_backups(database):
            print(backup)
        return 0
    if users := _users_of(database.parent):
        return _refuse(
            f"{database} is in use by {users}: close the window and stop the workers "
            "(`python -m app workers stop`) first, then restore; nothing was changed",
            EXIT_REFUSED,
        )
    try:
        used, set_aside = restore_backup(database, args.file)
    except (DatabaseError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_STORE
    print(f"restored {used}; the replaced database is kept as {set_aside}")
    return 0


def _users_of(data_dir: Path) -> str:
    """Who has the data folder's database open now, in words ("" when nobody does): a
    restore under a live worker would leave it finishing jobs into the file set aside."""
    windows = live_sessions(data_dir)
    workers = len(held_locks(data_dir / LIVENESS_FOLDER))
    found = [f"{count} {name}{'s' if count > 1 else ''}"
             for count, name in ((windows, "window"), (workers, "worker")) if count]  # fmt: skip
    return " and ".join(found)


def _copy(args: argparse.Namespace) -> int:
    if not is_database_url(args.to):
        return _refuse(f"--to needs a postgresql:// URL, not {args.to!r}", EXIT_REFUSED)
    source: Path = args.source or paths.database_path()
    if not source.is_file():
        return _refuse(f"there is no job database at {source}", EXIT_REFUSED)
    try:
        copied = copy_local_queue(args.to, source=source)
    except DatabaseError as error:
        return _refuse(str(error), EXIT_STORE)
    print(
        f"copied {copied.jobs} jobs, {copied.history_rows} history rows, "
        f"{copied.parent_links} parent links, {copied.init_images} init images and "
        f"{copied.files} images and checkpoints from {source} to {copied.where}"
    )
    return 0


def _password(_args: argparse.Namespace) -> int:
    url = database_location()
    if not is_database_url(url):
        return _refuse("no shared database is set: give --db postgresql://…", EXIT_REFUSED)
    password = _read_password(f"Password for {safe_url(url)}: ")
    if not password:
        return _refuse("no password given; nothing saved", EXIT_REFUSED)
    try:
        found = probe_queue(url, password)  # a wrong password is never saved
        path = save_password(url, password)
    except DatabaseError as error:
        return _refuse(str(error), EXIT_STORE)
    holds = {Found.EMPTY: "no Easel jobs yet", Found.OLDER: "an older Easel's jobs"}
    print(f"saved in {path}; {found.where} holds {holds.get(found.found, f'{found.jobs} jobs')}")
    return 0


def _read_password(prompt: str) -> str:
    """Asked without echo at a terminal; else the first line of stdin (for scripts)."""
    if sys.stdin.isatty():
        return getpass.getpass(prompt)
    return sys.stdin.readline().rstrip("\r\n")


def _refuse(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code
