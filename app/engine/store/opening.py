"""Opening the job queue: the database checks, the launch backup and the standard listeners.

Every process opens its queue here (the window, the CLI, workers), so the queue module itself
stays the one writer of status and knows nothing of settings, backups or the job graph.
"""

from __future__ import annotations

import logging
from enum import Enum
from pathlib import Path

from app.engine import paths
from app.engine.jobs.graph import graph_listener
from app.engine.jobs.queue import JobQueue, TransitionListener, TransitionRecord
from app.engine.outputs.kinds import FileKind
from app.engine.outputs.registry import all_output_kinds
from app.engine.paths import recorded_file
from app.engine.settings import database_location, load_settings
from app.engine.store.leftovers import sweep_interrupted_writes
from app.engine.store.stored_files import FETCHED_FOLDER, remove_files
from app.errors import DatabaseError
from app.models.backups import NoRoomForBackup, back_up, backups_dir, list_backups
from app.models.database_urls import is_database_url
from app.models.db import LOCK_TIMEOUT_S, PATIENT, Database
from app.models.opening import open_database

log = logging.getLogger(__name__)


class DatabaseMissing(DatabaseError):
    """The data folder was used before (backups, images) but its database file is gone."""


class OpenFor(Enum):
    """What a process opens the queue for; decides the checks and the lock patience."""

    READING = "reading"  # `jobs`, `show`: read-only, works during a lock or on a read-only disk
    REQUESTS = "requests"  # a command that writes
    WORKING = "working"  # a worker: waits out a held lock or a full disk, never fails a job
    LAUNCH = "launch"  # the window starting: checked, then backed up
    # A headless worker starting (`python -m app worker`): checked and backed up as at LAUNCH,
    # and as patient as WORKING, so its launch pass (and every watchdog pass after it) waits
    # out a lock held elsewhere instead of being skipped, which left a dead worker's job
    # running until the next pass, and for ever with --until-idle.
    HEADLESS = "headless"

    @property
    def is_launch(self) -> bool:
        return self in (OpenFor.LAUNCH, OpenFor.HEADLESS)

    @property
    def is_patient(self) -> bool:
        return self in (OpenFor.WORKING, OpenFor.HEADLESS)


def open_queue(location: Path | str | None = None, purpose: OpenFor = OpenFor.REQUESTS) -> JobQueue:
    """The queue on the user's database (or `location`: a SQLite file or a PostgreSQL URL),
    with the standard side effects.

    Except for READING, a damaged database raises `DatabaseCorrupt` (the file is left
    untouched). At LAUNCH a rotating backup is taken once the check passed, and the temp
    files of writes that a killed process never finished are swept.

    A SQLite file that is missing where the folder was used before raises `DatabaseMissing`
    and creates nothing, except at LAUNCH (the window, a headless worker), which starts a
    new queue as the first launch does, and logs that it did."""
    path = location or database_location()
    _check_not_gone(path, purpose)
    db = open_database(
        path,
        read_only=purpose is OpenFor.READING,
        lock_timeout_s=PATIENT if purpose.is_patient else LOCK_TIMEOUT_S,
        # Every writer checks first (tens of ms for 10,000 jobs): a damaged file is never
        # written to. Readers need not: a damaged page they meet raises DatabaseCorrupt.
        check_integrity=purpose is not OpenFor.READING,
    )
    if purpose.is_launch and db.is_sqlite:  # PostgreSQL: the server's own backups
        _back_up(db)
    if purpose.is_launch:
        sweep_interrupted_writes(_written_folders())
    queue = JobQueue(db)
    queue.listeners.append(_checkpoint_cleaner(queue))
    queue.listeners.append(graph_listener(queue))
    return queue


def _check_not_gone(location: Path | str, purpose: OpenFor) -> None:
    """Refuse to make a new, empty queue in place of one that was deleted or moved away:
    `jobs` showed nothing (exit 0), and the next job 1 took the old job 1's name."""
    if is_database_url(str(location)) or Path(location).exists():
        return
    path = Path(location)
    used = _signs_of_use(path)
    if not used:
        return  # a first launch, or a file a test or script named: make it
    if purpose is OpenFor.LAUNCH:
        log.warning("made a new, empty job database at %s, though %s", path, used)
        return
    raise DatabaseMissing(
        f"There is no job database at {path}, though {used}: `python -m app db restore` "
        "puts the newest backup back (or open Easel to start a new, empty queue); nothing "
        "was created",
        path,
    )


def _signs_of_use(path: Path) -> str:
    """What shows a database was there before (in words), or "" when nothing does."""
    signs = []
    if backups := list_backups(path):
        signs.append(f"its backups are in {backups_dir(path)} (the newest: {backups[-1].name})")
    if set_aside := sorted(path.parent.glob(f"{path.name}.*-*")):
        signs.append(f"an earlier one was set aside as {set_aside[-1].name}")
    outputs = _outputs_folder()
    if path == paths.database_path() and _has_outputs(outputs):
        signs.append(f"its images are in {outputs}")
    return "; ".join(signs)


def _outputs_folder() -> Path:
    """Where images go, without making the folder (`Settings.outputs_path` makes it)."""
    chosen = load_settings().outputs_dir
    return Path(chosen) if chosen else paths.outputs_dir(create=False)


def _has_outputs(folder: Path) -> bool:
    """Whether `folder` holds a file of any kind of output Easel writes."""
    try:
        return any(any(folder.glob(f"*{kind.suffix}")) for kind in all_output_kinds())
    except OSError:
        return False


def _written_folders() -> list[Path]:
    """Where images and checkpoints are written atomically (see `leftovers`)."""
    outputs = load_settings().outputs_path()
    return [outputs, outputs / FETCHED_FOLDER, paths.checkpoints_dir()]


def _back_up(db: Database) -> None:
    try:
        log.info("backed up the job database to %s", back_up(db))
    except NoRoomForBackup as error:  # the queue needs that space more than a backup
        log.warning("skipped the launch backup. %s", error)
    except (DatabaseError, OSError) as error:  # a missing backup must not stop the app
        log.warning("could not back up the job database: %s", error)


def _checkpoint_cleaner(queue: JobQueue) -> TransitionListener:
    """Remove a job's pause checkpoint once the job can never resume from it (its file
    here, and its copy in a shared database)."""

    def clean(record: TransitionRecord) -> None:
        if not (record.changed and record.to_status.is_terminal):
            return
        checkpoint = recorded_file(
            queue.checkpoint_path_of(record.job_id), shared=queue.db.shares_files,
            folders=[paths.checkpoints_dir()],
        )  # fmt: skip
        if checkpoint is not None:  # on a shared store, only one in this machine's folder
            checkpoint.unlink(missing_ok=True)
        if queue.db.shares_files:
            remove_files(queue.db, record.job_id, FileKind.CHECKPOINT)

    return clean
