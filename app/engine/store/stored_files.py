"""Outputs and checkpoints through the database, so no machine needs another's disk.

A worker writes a file locally first (atomically, as always), then copies it into the
`job_file` table: the finished output (stored as its kind's `FileKind`), and the newest
pause or rolling checkpoint of the claim it holds. The copy is conditional on the worker
still holding the job (the same rule as every other worker write), so a worker that lost
its job never replaces the progress of the claim that holds it now. A worker that resumes a
job whose checkpoint is not on its disk, and a window or command that shows or exports an
output made elsewhere, read it back from here, checked against its SHA-256. Local folders
stay a cache.

Only stores that are shared between machines (`Database.shares_files`: PostgreSQL) hold
copies; on SQLite, one machine's store, the local files are the only copy.

On a shared store any peer can write a row, so what a row says about files is confined:
a stored file's name must be a plain file name (written only under `outputs/fetched`), and
a job's recorded output is read here only from inside this machine's outputs folder
(`paths.recorded_file`); anything else is refused or ignored, never followed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, insert, select, update

from app.durable import atomic_write
from app.engine import paths
from app.engine.generation.loop.checkpoint_files import (
    Claim,
    claim_of,
    earlier_files,
    saved_step,
    saved_step_in,
)
from app.engine.jobs.states import JobStatus
from app.engine.outputs.kinds import FileKind, OutputKind
from app.engine.outputs.registry import output_of_job
from app.engine.paths import OutsideItsFolder, plain_file_name, recorded_file
from app.errors import DatabaseError, UserError
from app.models.db import Database
from app.models.tables import JOB, JOB_FILE, Job

if TYPE_CHECKING:
    from app.engine.jobs.queue import JobQueue

log = logging.getLogger(__name__)

LIMIT_ENV = "EASEL_DB_FILE_LIMIT_MB"
DEFAULT_LIMIT_MB = 64.0  # PostgreSQL's bytea takes up to 1 GB; a 4K image is a few tens of MB
FETCHED_FOLDER = "fetched"  # under the outputs folder: outputs read back from the database
_RUNNING = [status.value for status in JobStatus if status.is_running]


class FileTooLarge(UserError):
    """A file over the database's limit: it stays only on the machine that made it."""


@dataclass(frozen=True)
class StoredFile:
    id: int
    job_id: int
    kind: FileKind
    name: str
    attempt: int
    claim: int
    sha256: str
    data: bytes

    @property
    def intact(self) -> bool:
        """The bytes are those that were stored (a damaged row never reaches a reader)."""
        return hashlib.sha256(self.data).hexdigest() == self.sha256


def limit_bytes() -> int:
    """The largest file the database takes (`EASEL_DB_FILE_LIMIT_MB`, default 64 MB)."""
    try:
        megabytes = float(os.environ.get(LIMIT_ENV, "") or DEFAULT_LIMIT_MB)
    except ValueError:
        log.warning("%s is not a number; using %g MB", LIMIT_ENV, DEFAULT_LIMIT_MB)
        megabytes = DEFAULT_LIMIT_MB
    return int(megabytes * 1024 * 1024)


def check_size(path: Path, size: int) -> None:
    limit = limit_bytes()
    if size > limit:
        raise FileTooLarge(
            f"{path.name} ({_megabytes(size)}) is over the job database's limit of "
            f"{_megabytes(limit)} ({LIMIT_ENV}); it stays only on this machine, at {path}"
        )


def store_file(
    db: Database,
    job: Job,
    kind: FileKind,
    path: Path,
    *,
    worker_id: str,
    claim: int,
    replaces: tuple[FileKind, ...] = (),
) -> bool:
    """Copy the local file `path` into the database as the job's `kind` file, replacing the
    previous one (and the `replaces` kinds: a finished output ends the checkpoint's use).

    Only while `worker_id` still holds the job (running, its worker): False otherwise, and
    nothing is written. Raises `FileTooLarge` (nothing written either) and `OSError`."""
    data = path.read_bytes()
    check_size(path, len(data))
    job_id = job.id
    now = time.time()
    with db.write() as conn:
        # Also locks the job row (PostgreSQL) until the commit: a watchdog or a new claim
        # moving the job meanwhile waits, then finds the file written by its holder.
        held = conn.execute(
            update(JOB)
            .where(JOB.c.id == job_id, JOB.c.worker_id == worker_id, JOB.c.status.in_(_RUNNING))
            .values(heartbeat_at=now)
        ).rowcount
        if held != 1:
            return False
        kinds = [kind.value, *(other.value for other in replaces)]
        conn.execute(_live(delete(JOB_FILE), job_id).where(JOB_FILE.c.kind.in_(kinds)))
        conn.execute(
            insert(JOB_FILE).values(
                job_id=job_id, kind=kind.value, name=path.name, attempt=job.attempt,
                claim=claim, sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                data=data, created_at=now,
            )
        )  # fmt: skip
    return True


def latest_file(db: Database, job_id: int, kind: FileKind) -> StoredFile | None:
    """The job's newest `kind` file that was not set aside; None if there is none."""
    query = (
        _live(select(JOB_FILE), job_id)
        .where(JOB_FILE.c.kind == kind.value)
        .order_by(JOB_FILE.c.id.desc())
        .limit(1)
    )
    with db.read() as conn:
        row = conn.execute(query).first()
    if row is None:
        return None
    return StoredFile(
        row.id, row.job_id, FileKind(row.kind), row.name, row.attempt, row.claim,
        row.sha256, bytes(row.data),
    )  # fmt: skip


def saved_checkpoint_step(db: Database, job_id: int, folder: Path) -> int | None:
    """The denoising step the job's saved progress reached, as its checkpoint's header says:
    this machine's newest file, else (a shared store) the database's copy. None: no progress
    saved (a crash-requeued job then starts over, and shows so)."""
    step = saved_step_in(folder, job_id)
    if step is not None or not db.shares_files:
        return step
    head = func.substr(JOB_FILE.c.data, 1, 1 << 16)  # the header line, never the payload
    query = (
        _live(select(head), job_id)
        .where(JOB_FILE.c.kind == FileKind.CHECKPOINT.value)
        .order_by(JOB_FILE.c.id.desc())
        .limit(1)
    )
    with db.read() as conn:
        data = conn.execute(query).scalar()
    return saved_step(bytes(data)) if data is not None else None


def saved_step_reader(db: Database, folder: Path | None = None) -> Callable[[Job], int | None]:
    """`saved_checkpoint_step` for the retry policy: the jobs' checkpoints are in `folder`
    (default: this data folder's, where the app's workers write them)."""
    where = folder if folder is not None else paths.checkpoints_dir()
    return lambda job: saved_checkpoint_step(db, job.id or 0, where)


def retry_from_saved_step(queue: JobQueue, job_id: int) -> None:
    """Retry by hand: the row keeps the step the job's saved checkpoint reached, as the
    retry policy's does (the worker continues from there)."""
    step = saved_checkpoint_step(queue.db, job_id, paths.checkpoints_dir())
    queue.retry(job_id, progress_step=step or 0)


def set_aside(db: Database, stored: StoredFile) -> None:
    """Mark a damaged row so no one reads it again; it stays as evidence, like a file."""
    with db.write() as conn:
        conn.execute(
            update(JOB_FILE).where(JOB_FILE.c.id == stored.id).values(set_aside_at=time.time())
        )


def remove_files(db: Database, job_id: int, kind: FileKind) -> int:
    """Delete the job's `kind` rows (a job that can no longer resume); how many went."""
    with db.write() as conn:
        where = _live(delete(JOB_FILE), job_id).where(JOB_FILE.c.kind == kind.value)
        return int(conn.execute(where).rowcount)


def copy_local_files(source: Database, target: Database) -> int:
    """After `db copy`: store this machine's outputs of finished jobs and checkpoints of
    paused ones in `target`, so the other machines can show and resume them. Files that
    are gone or over the limit are skipped (said in the log). How many were stored."""
    wanted = select(
        JOB.c.id, JOB.c.kind, JOB.c.status, JOB.c.attempt, JOB.c.output_path,
        JOB.c.checkpoint_path,
    )  # fmt: skip
    with source.read() as conn:
        rows = conn.execute(
            wanted.where(JOB.c.status.in_([JobStatus.SUCCESS.value, JobStatus.PAUSED.value]))
        ).all()
    stored = 0
    for job_id, job_kind, status, attempt, output, checkpoint in rows:
        finished = status == JobStatus.SUCCESS.value
        kind = output_of_job(job_kind).file_kind if finished else FileKind.CHECKPOINT
        local = output if finished else checkpoint
        if not local:
            continue
        path = Path(local)
        try:
            data = path.read_bytes()
            check_size(path, len(data))
        except (OSError, FileTooLarge) as error:
            log.warning("job %s: %s not copied: %s", job_id, path.name, error)
            continue
        with target.write() as conn:
            conn.execute(
                insert(JOB_FILE).values(
                    job_id=job_id, kind=kind.value, name=path.name, attempt=attempt,
                    claim=claim_of(path), sha256=hashlib.sha256(data).hexdigest(),
                    size=len(data), data=data, created_at=time.time(),
                )
            )  # fmt: skip
        stored += 1
    return stored


def output_file(db: Database, job: Job, outputs_dir: Path) -> Path | None:
    """Where this machine can read the job's output: its own file if it is here, else a copy
    from the database written under `outputs_dir/fetched`; None if there is no output.

    Raises `OSError` when the copy cannot be written here, and `OutsideItsFolder` when the
    database names the copy with anything but a plain file name."""
    local = _local_output(db, job, outputs_dir)
    if local is not None:
        return local
    stored = _intact_output(db, job)
    if stored is None:
        return None
    target = outputs_dir / FETCHED_FOLDER / _fetched_name(stored)
    if not (target.is_file() and _sha256(target) == stored.sha256):
        atomic_write(target, lambda handle: handle.write(stored.data))
    return target


def queue_output_file(queue: JobQueue, job: Job, outputs_dir: Path) -> Path | None:
    """`output_file` for callers that hold the queue, not its database (the window)."""
    return output_file(queue.db, job, outputs_dir)


def output_bytes(db: Database, job: Job, outputs_dir: Path | None = None) -> bytes | None:
    """The job's output, from its file here or from the database; None if there is none.
    On a shared store, a file here only inside `outputs_dir` (none given: the database's)."""
    local = _local_output(db, job, outputs_dir)
    if local is not None:
        return local.read_bytes()
    stored = _intact_output(db, job)
    return stored.data if stored is not None else None


def output_kind_of(job: Job) -> OutputKind:
    """The kind of output `job` leaves (its file's suffix, its media type), by its kind."""
    return output_of_job(job.kind)


def _local_output(db: Database, job: Job, outputs_dir: Path | None) -> Path | None:
    """The job's output file on this disk, if the row names one this machine may read."""
    folders = [outputs_dir] if outputs_dir is not None else []
    path = recorded_file(job.output_path, shared=db.shares_files, folders=folders)
    return path if path is not None and path.is_file() else None


def _fetched_name(stored: StoredFile) -> str:
    if not plain_file_name(stored.name):
        raise OutsideItsFolder(
            f"job {stored.job_id}'s {stored.kind.value} in the job database is named "
            f"{stored.name!r}, which is not a plain file name; it was not written here"
        )
    return stored.name


class NoOutput(UserError):
    """The job has no output this machine can read."""


def export_output(db: Database, job: Job, folder: Path, outputs_dir: Path | None = None) -> Path:
    """Write the job's output (the file as it is, its metadata included) into `folder`.

    From the file here (on a shared store: inside `outputs_dir`), else from the database.
    An existing file of the same name is left alone: kept if it holds the same bytes,
    refused (`UserError`) otherwise. Its path.
    Raises `NoOutput` and `OSError`."""
    data = output_bytes(db, job, outputs_dir)
    if data is None:
        raise NoOutput(no_output_reason(job))
    name = Path(job.output_path).name if job.output_path else ""
    if not plain_file_name(name):
        name = output_kind_of(job).default_name(job.id or 0, job.seed)
    target = folder / name
    if target.exists():
        if target.is_file() and target.read_bytes() == data:
            return target
        raise UserError(f"{target} already exists and holds something else; nothing was written")
    atomic_write(target, lambda handle: handle.write(data))
    return target


def no_output_reason(job: Job) -> str:
    noun = output_kind_of(job).name
    if job.status != JobStatus.SUCCESS.value:
        return f"Job {job.id} has no {noun}: it is {job.status}"
    return (
        f"Job {job.id}'s {noun} is not on this machine ({job.output_path}) and the job "
        "database holds no copy of it"
    )


def _intact_output(db: Database, job: Job) -> StoredFile | None:
    if job.status != JobStatus.SUCCESS.value or job.id is None:
        return None
    stored = latest_file(db, job.id, output_kind_of(job).file_kind)
    if stored is not None and not stored.intact:
        log.warning("job %s: the output in the database is damaged; set aside", job.id)
        try:
            set_aside(db, stored)
        except DatabaseError as error:  # a reader (read-only here): the next writer will
            log.info("could not set the damaged output aside: %s", error)
        return None
    return stored


def _live(statement: Any, job_id: int | None) -> Any:
    return statement.where(JOB_FILE.c.job_id == job_id, JOB_FILE.c.set_aside_at.is_(None))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


class SharedProgress:
    """One claim's files and the database: the checkpoint fetched before the run when this
    machine lacks it, each new save copied in, and the output copied at the end.

    Called from the run's thread and its heartbeat thread; one copy at a time."""

    def __init__(self, db: Database, job: Job, claim: Claim, worker_id: str) -> None:
        self.db = db
        self.job = job
        self.claim = claim
        self.worker_id = worker_id
        self._lock = threading.Lock()
        self._copied: tuple[int, int] | None = None  # (mtime_ns, size) of the file copied last
        self._refused: tuple[int, int] | None = None  # ... of the file found too large
        self.last_copy_s = 0.0  # how long copying the last checkpoint in took

    def fetch(self, recorded: Path | None) -> str | None:
        """Write the database's checkpoint to this claim's file if it is newer than any
        here (a job paused or lost on another machine); a note for the timeline, or None."""
        if not self.db.shares_files:
            return None
        stored = latest_file(self.db, self.claim.job_id, FileKind.CHECKPOINT)
        local = earlier_files(self.claim)
        if recorded is not None and recorded.is_file():
            local.append(recorded)
        if stored is None or stored.claim <= max(map(claim_of, local), default=-2):
            return None
        if not stored.intact:
            set_aside(self.db, stored)
            then = "" if local else ", started over from step 0"
            return (
                f"the saved progress in the database ({stored.name}) was damaged (its checksum "
                f"does not match); set aside{then}"
            )
        atomic_write(self.claim.file, lambda handle: handle.write(stored.data))
        self._copied = _signature(self.claim.file)  # already there: no need to copy it back
        return f"the saved progress ({stored.name}) came from the database"

    def share_checkpoint(self) -> str | None:
        """Copy this claim's checkpoint file in if it changed since the last copy; a note if
        it is too large for the database (said once per run)."""
        if not self.db.shares_files:
            return None
        with self._lock:
            signature = _signature(self.claim.file)
            if signature is None or signature in (self._copied, self._refused):
                return None
            started = time.monotonic()
            try:
                held = store_file(
                    self.db, self.job, FileKind.CHECKPOINT, self.claim.file,
                    worker_id=self.worker_id, claim=self.claim.version,
                )  # fmt: skip
                self.last_copy_s = time.monotonic() - started
            except FileNotFoundError:
                return None  # removed meanwhile (the run finished or was cancelled)
            except FileTooLarge as error:
                said = self._refused is not None  # each rolling save would say it again
                self._refused = signature
                log.warning("job %s: %s", self.claim.job_id, error)
                return None if said else f"the saved progress can resume only here: {error}"
            if held:
                self._copied = signature
            return None

    def share_output(self, path: Path) -> str | None:
        """Copy the finished output in, as its kind is stored (its checkpoint rows go); a
        note if it is too large."""
        if not self.db.shares_files or not path.is_file():
            return None
        try:
            store_file(
                self.db, self.job, output_kind_of(self.job).file_kind, path,
                worker_id=self.worker_id,
                claim=self.claim.version, replaces=(FileKind.CHECKPOINT,),
            )  # fmt: skip
        except FileTooLarge as error:
            log.warning("job %s: %s", self.claim.job_id, error)
            return str(error)
        return None

    def set_aside_copy_of(self, damaged: Path) -> None:
        """A checkpoint found damaged here: set aside its copy in the database too, so no
        other machine resumes from it."""
        if not self.db.shares_files or not damaged.is_file():
            return
        stored = latest_file(self.db, self.claim.job_id, FileKind.CHECKPOINT)
        if stored is not None and stored.sha256 == _sha256(damaged):
            set_aside(self.db, stored)


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns, stat.st_size
