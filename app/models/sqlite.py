"""SQLite: the embedded store, one machine's file; its engine, pragmas, locking and errors.

The `Dialect` for a SQLite file (see `app.models.db`): BEGIN IMMEDIATE with a wait of our
own, its result codes translated into `app.errors`, `PRAGMA data_version` to poll, and the
write-ahead log, integrity check and compaction that a file needs looked after.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

try:
    import fcntl
except ImportError:  # Windows: hot writers poll for the lock, as they always did
    fcntl = None  # type: ignore[assignment]

from sqlalchemy import Connection, Engine, create_engine, event

from app.durable import fsync_folder
from app.errors import (
    DatabaseCorrupt,
    DatabaseError,
    DatabaseLocked,
    DatabaseReadOnly,
    DiskIOError,
    disk_full,
    free_megabytes,
)
from app.models.backups import BACKUP_FOLDER
from app.models.db import LOCK_TIMEOUT_S, READ_ONLY_OPTION, Database, sqlite_synchronous
from app.models.migrations import SCHEMA_VERSION, ensure_schema, read_version

log = logging.getLogger(__name__)

_PATIENT_BUSY_TIMEOUT_MS = 24 * 3600 * 1000
# The write-ahead log is folded back into the database every this many pages (SQLite's
# default), and a log that outgrew its usual size (a long reader held the checkpoint back)
# is cut back to this size afterwards; at idle `trim_journal` truncates it to nothing: left
# alone it grew to 30x a small database on a full disk. A smaller limit or interval made
# every few hundred commits shrink and regrow the file: transitions ran at half the speed
# of plain sqlite3 (benchmarks/transitions.py) instead of about 0.7-0.9 of it.
WAL_AUTOCHECKPOINT_PAGES = 1000
WRITERS_LINE_SUFFIX = "-writers"  # the file hot writers queue on (`WritersLine`)
JOURNAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024
TRIM_JOURNAL_EVERY_S = 5.0


class SqliteDialect:
    """What a SQLite file does its own way (see `Dialect`). One per database: it remembers
    when the journal was last trimmed."""

    shares_files = False  # one machine's store: the local folders hold images and checkpoints
    notify_sql = None  # everyone polls the one file (`data_version`)
    serialise_sql = None  # BEGIN IMMEDIATE holds the one write lock
    has_clock = False  # one machine's file: that machine's clock is the only one

    def __init__(self) -> None:
        self._last_trim = 0.0
        self._turns: WritersLine | None = None
        self._turns_lock = threading.Lock()

    def location(self, db: Database) -> str:
        return str(db.path if db.path is not None else db.engine.url.database)

    def set_up_hot_connection(self, raw: Any) -> None:
        raw.execute("PRAGMA busy_timeout=0")  # _begin_immediate does the waiting

    def begin_hot_write(self, cursor: Any, lock_timeout_s: float | None) -> None:
        _begin_immediate(cursor, lock_timeout_s)

    def numbered_cursor(self, cursor: Any) -> Any:
        raise NotImplementedError("SQLite statements keep their ? placeholders")

    @contextmanager
    def unsynced(self, raw: Any) -> Iterator[None]:
        """The commit without its wait for the disk (`synchronous=NORMAL` for this one
        transaction): it survives a crash of any process, and a power cut once any later
        commit made with FULL (a heartbeat, a step's progress, any submit) is on the disk,
        as that one syncs the write-ahead log up to itself; a commit after it never
        survives without it. The wait was most of a claim (an fsync, 1-4 ms on this
        machine's disk, where SQLite's own work is 0.3 ms)."""
        level = sqlite_synchronous()
        if level == "NORMAL":
            yield
            return
        raw.execute("PRAGMA synchronous=NORMAL")
        try:
            yield
        finally:
            raw.execute(f"PRAGMA synchronous={level}")

    def writers_turn(self, db: Database) -> AbstractContextManager[None]:
        """A patient database's hot writers (workers) wait in line (`WritersLine`); one
        that gives up after a while (the window) polls, as it has a deadline to keep."""
        if not db.patient or db.path is None or fcntl is None:
            return contextlib.nullcontext()
        with self._turns_lock:
            if self._turns is None:
                self._turns = WritersLine(Path(f"{db.path}{WRITERS_LINE_SUFFIX}"))
            return self._turns.turn()

    def dispose(self) -> None:
        with self._turns_lock:
            turns, self._turns = self._turns, None
        if turns is not None:
            turns.close()

    def pipeline(self, raw: Any) -> AbstractContextManager[Any]:
        return contextlib.nullcontext()  # the store is in this process: no round trips

    def alone(self, raw: Any) -> AbstractContextManager[None]:
        return contextlib.nullcontext()  # a hot write's BEGIN IMMEDIATE takes the lock

    def ensure_function(self, db: Database, name: str, definition: str) -> bool:
        return False  # SQLite runs no functions of ours

    def translate(self, error: BaseException, db: Database) -> DatabaseError | None:
        if not isinstance(error, sqlite3.Error):
            return None
        path = db.path or Path(str(db.engine.url.database))
        return translate_sqlite_error(error, path, db.lock_timeout_s)

    def is_broken(self, driver_connection: Any) -> bool:
        return False  # a file does not hang up

    def data_version(self, conn: Connection) -> int:
        return int(conn.exec_driver_sql("PRAGMA data_version").scalar_one())

    def trim_journal(self, db: Database) -> None:
        """Fold the write-ahead log back into the database and truncate it (at idle).

        At most every few seconds, and never an error: a busy reader only postpones it."""
        now = time.monotonic()
        if db.read_only or now - self._last_trim < TRIM_JOURNAL_EVERY_S:
            return
        self._last_trim = now
        try:
            if Path(f"{db.path}-wal").stat().st_size == 0:
                return
            db.hot_connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except (OSError, sqlite3.Error) as error:
            log.debug("journal not trimmed: %s", error)

    def check_integrity(self, db: Database) -> None:
        """`PRAGMA quick_check`; a damaged file refuses every later write."""
        with db.read() as conn:
            problems = [str(row) for row in conn.exec_driver_sql("PRAGMA quick_check").scalars()]
        if problems != ["ok"]:
            # SQLite's first finding may span lines ("*** in database main ***\nPage 31: ...").
            detail = " ".join(problems[0].split())
            db.refusal = corrupt_database(db.path or Path("?"), detail)
            raise db.refusal

    def server_time(self, conn: Connection) -> float | None:
        return None  # one machine's file: its clock is the only one

    def serialise(self, conn: Connection, key: int) -> None:
        """Nothing to take: BEGIN IMMEDIATE already holds the one write lock."""

    def compact(self, db: Database) -> None:
        """A database made with auto_vacuum=INCREMENTAL frees the pages cheaply; an older
        one is converted once by a full VACUUM (which needs as much free disk as the file)."""
        db.check_writable()
        with db.translated_errors():
            raw = db.engine.raw_connection()
            try:
                driver: Any = raw.driver_connection
                mode = driver.execute("PRAGMA auto_vacuum").fetchone()[0]
                if mode == 2:  # INCREMENTAL
                    # executescript steps it to the end; one execute() frees a single page.
                    driver.executescript("PRAGMA incremental_vacuum;")
                else:
                    driver.execute("PRAGMA auto_vacuum=INCREMENTAL")
                    driver.execute("VACUUM")
                driver.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                raw.close()


def open_sqlite(
    path: Path,
    *,
    read_only: bool = False,
    lock_timeout_s: float | None = LOCK_TIMEOUT_S,
    check_integrity: bool = False,
) -> Database:
    """The SQLite file at `path`, its schema brought up to date (see `open_database`)."""
    if read_only and not path.exists():
        read_only = False  # nothing to read yet: create it like any first launch
    db = Database(
        _sqlite_engine(path, read_only=read_only, lock_timeout_s=lock_timeout_s),
        SqliteDialect(),
        path=path, read_only=read_only, lock_timeout_s=lock_timeout_s,
    )  # fmt: skip
    try:
        if check_integrity:
            db.dialect.check_integrity(db)
        if read_only:
            if read_version(db) != SCHEMA_VERSION:  # older: a writable open migrates it
                db.dispose()
                return open_sqlite(path, lock_timeout_s=lock_timeout_s)
        else:
            ensure_schema(db)
    except BaseException:
        db.dispose()
        raise
    return db


def _sqlite_engine(path: Path, *, read_only: bool, lock_timeout_s: float | None) -> Engine:
    busy_ms = _busy_timeout_ms(lock_timeout_s)
    connect_args: dict[str, Any] = {"timeout": busy_ms / 1000, "check_same_thread": False}
    if read_only:
        # A URI, so SQLite itself refuses writes and never creates files in the folder.
        uri = f"file:{quote(str(path.resolve()))}?mode=ro"
        if _no_room_for_shm(path.parent) and _wal_is_empty(path):
            # WAL readers need a -shm file; in a folder nobody can write (or on a full disk)
            # none can be made. With an empty (or no) -wal, everything is in the file, and
            # nobody can change it there: read it as it is.
            uri += "&immutable=1"
        engine = create_engine(
            "sqlite://", creator=lambda: sqlite3.connect(uri, uri=True, **connect_args)
        )
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DatabaseReadOnly(_read_only_message(path.parent), path.parent) from error
        if not path.exists():
            _create_compactable(path)
        engine = create_engine(f"sqlite:///{path}", connect_args=connect_args)
    event.listen(engine, "connect", _connection_setup(busy_ms, read_only=read_only))
    event.listen(engine, "begin", _begin_sqlite_transaction)
    return engine


def _create_compactable(path: Path) -> None:
    """A new file whose space freed by a prune can go back to the disk (`compact`).

    auto_vacuum only takes effect before the file's first page is written (the WAL switch
    writes it), so it is set on a connection of its own before anything else."""
    conn = sqlite3.connect(path)
    try:
        conn.execute(f"PRAGMA synchronous={sqlite_synchronous()}")
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()
    fsync_folder(path.parent)  # SQLite flushes the folder for its -wal, not for the file itself


def _busy_timeout_ms(lock_timeout_s: float | None) -> int:
    return _PATIENT_BUSY_TIMEOUT_MS if lock_timeout_s is None else int(lock_timeout_s * 1000)


def _connection_setup(busy_ms: int, *, read_only: bool) -> Callable[[Any, Any], None]:
    def configure(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event, not pysqlite, decide how transactions start.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        # FULL, in WAL too: an acknowledged job survives a power cut (`sqlite_synchronous`).
        # A connection's own setting, so every one sets it, the read-only ones included.
        cursor.execute(f"PRAGMA synchronous={sqlite_synchronous()}")
        if not read_only:  # journal settings are the writer's business (and need writing)
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
            cursor.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT_BYTES}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return configure


class WritersLine:
    """The hot writers of one SQLite file on this machine, waiting their turn asleep.

    Polling for SQLite's write lock (`_begin_immediate`) hands it to whoever polls first
    once it is free: with eight claimers on two cores, the pollers took the CPU from the
    holder, whose transaction then held the lock longer (claims ran at half their serial
    rate). Here each waits in the kernel on an exclusive `flock` of a file beside the
    database, taken before BEGIN IMMEDIATE and let go after the commit, and the kernel
    wakes the next at once. It only orders the waiting: SQLite's own lock still guards the
    data (a writer outside the line, or a lock file that cannot be made, polls as before).
    Not the database file itself: closing a descriptor of a file drops every POSIX lock
    the process holds on it, SQLite's too.
    """

    def __init__(self, path: Path) -> None:
        self._threads = threading.Lock()  # flock does not part threads sharing one descriptor
        try:
            self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            log.debug("hot writers poll for the lock: %s", error)
            self._fd = None

    @contextmanager
    def turn(self) -> Iterator[None]:
        with self._threads:
            fd = self._fd
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        with self._threads:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _begin_immediate(cursor: sqlite3.Cursor, lock_timeout_s: float | None) -> None:
    """BEGIN IMMEDIATE, waiting for the write lock with short sleeps of our own.

    SQLite's busy handler sleeps 1, 2, 5, 10... ms between tries: with several workers
    claiming at once, most of their time went to sleeping past a lock already free. Hot
    connections therefore run with busy_timeout=0; in WAL mode, once BEGIN IMMEDIATE
    holds the write lock, nothing inside the transaction waits for a lock again.
    A patient caller (`lock_timeout_s=None`, a worker holding a job) waits as long as the
    lock is held, backing off to a few tries a second: lock contention is never a reason
    to fail a job.
    """
    started = time.monotonic()
    delay = 0.0001
    warned = False
    while True:
        try:
            cursor.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as error:
            waited = time.monotonic() - started
            if not _is_busy(error) or (lock_timeout_s is not None and waited > lock_timeout_s):
                raise
        if waited > LOCK_TIMEOUT_S and not warned:
            log.warning("the job database has been locked for %.0fs; still waiting", waited)
            warned = True
        time.sleep(delay)
        delay = min(delay * 2, 0.004 if waited < LOCK_TIMEOUT_S else 0.25)


def _is_busy(error: sqlite3.OperationalError) -> bool:
    return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY or "locked" in str(error)


def _begin_sqlite_transaction(conn: Connection) -> None:
    read_only = conn.get_execution_options().get(READ_ONLY_OPTION, False)
    # Straight to the driver: BEGIN needs none of SQLAlchemy's statement machinery.
    driver = conn.connection.driver_connection
    assert driver is not None
    driver.execute("BEGIN" if read_only else "BEGIN IMMEDIATE")


def translate_sqlite_error(
    error: sqlite3.Error, path: Path, lock_timeout_s: float | None
) -> DatabaseError | None:
    """The Easel error for a runtime SQLite error, by its result code; None for a bug.

    Like qutebrowser's misc/sql.py (KnownError / BugError): the codes a user can do
    something about become one sentence naming the file or folder; the rest stay raw.
    """
    code = getattr(error, "sqlite_errorcode", None)
    if code is None:
        return None  # raised by the driver itself (misuse, closed cursor): a bug
    primary = code & 0xFF  # extended codes keep the primary code in the low byte
    folder = path.parent
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        waited = f" for more than {lock_timeout_s:g} s" if lock_timeout_s is not None else ""
        return DatabaseLocked(
            f"The job database {path} is locked by another program{waited}; "
            "nothing was changed, try again in a moment",
            path,
        )
    if primary == sqlite3.SQLITE_FULL:
        return disk_full(folder)
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM) or (
        primary == sqlite3.SQLITE_CANTOPEN and not _writable(folder)
    ):
        return DatabaseReadOnly(_read_only_message(folder), folder)
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return corrupt_database(path, str(error))
    if primary == sqlite3.SQLITE_IOERR:
        free = free_megabytes(folder)
        if free is not None and free < 1:  # a full disk often shows up as an I/O error
            return disk_full(folder)
        return DiskIOError(
            f"The disk holding {folder} failed a read or write ({error}); check the disk", path
        )
    if primary == sqlite3.SQLITE_CANTOPEN:
        return DiskIOError(f"Cannot open the job database {path} ({error})", path)
    return None


def _read_only_message(folder: Path) -> str:
    return (
        f"The data folder {folder} is read-only: Easel can list and show its jobs but "
        "cannot change them; nothing was changed"
    )


def _wal_is_empty(path: Path) -> bool:
    try:
        return Path(f"{path}-wal").stat().st_size == 0
    except FileNotFoundError:
        return True


def _no_room_for_shm(folder: Path) -> bool:
    free = free_megabytes(folder)
    return not _writable(folder) or (free is not None and free < 1)


def _writable(folder: Path) -> bool:
    if not os.access(folder, os.W_OK):
        return False
    try:
        return not os.statvfs(folder).f_flag & os.ST_RDONLY
    except OSError:
        return False


def corrupt_database(path: Path, detail: str) -> DatabaseCorrupt:
    return DatabaseCorrupt(
        f"The job database {path} is damaged ({detail}); Easel stopped writing to it and "
        f"left it untouched. Close Easel and run `python -m app db restore` to go back to "
        f"the newest backup in {path.parent / BACKUP_FOLDER}",
        path,
    )
