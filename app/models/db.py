"""The database: engine set-up, SQLite pragmas, transactions and the schema version.

Everything SQLite-specific lives here, so the rest of the code speaks portable
SQLAlchemy and can later run on PostgreSQL unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.expression import ClauseElement
from sqlmodel import SQLModel

from app.errors import (
    DatabaseCorrupt,
    DatabaseError,
    DatabaseLocked,
    DatabaseReadOnly,
    DiskFull,
    DiskIOError,
    disk_full,
    free_megabytes,
)
from app.models.search_index import create_search_index
from app.models.tables import JOB_FILE, JOB_INPUT, JOB_PARENT, WORKER, SchemaInfo

log = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMA_VERSION = 8
BUSY_TIMEOUT_MS = 10_000
LOCK_TIMEOUT_S = BUSY_TIMEOUT_MS / 1000  # how long a write waits for the lock by default
PATIENT = None  # lock_timeout_s for workers: wait for the lock as long as it takes
_PATIENT_BUSY_TIMEOUT_MS = 24 * 3600 * 1000
_READ_ONLY = "easel_read_only"
# The write-ahead log is folded back into the database every this many pages (SQLite's
# default), and a log that outgrew its usual size (a long reader held the checkpoint back)
# is cut back to this size afterwards; at idle `trim_journal` truncates it to nothing: left
# alone it grew to 30x a small database on a full disk. A smaller limit or interval made
# every few hundred commits shrink and regrow the file: transitions ran at half the speed
# of plain sqlite3 (benchmarks/transitions.py) instead of about 0.7-0.9 of it.
WAL_AUTOCHECKPOINT_PAGES = 1000
JOURNAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024
TRIM_JOURNAL_EVERY_S = 5.0
FULL_DISK_FIRST_WAIT_S, FULL_DISK_MAX_WAIT_S = 0.5, 10.0
BACKUP_FOLDER = "backups"
BACKUPS_KEPT = 3


class SchemaTooNew(DatabaseError):
    pass


class Database:
    """One engine plus the two kinds of unit of work: `write()` and `read()`.

    SQLite's runtime errors leave here translated by their code into `app.errors`
    (locked, disk full, read-only, corrupt, I/O); anything else is a bug and stays raw.
    After a corruption is seen, every further write is refused: the file stays as it is.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        path: Path | None = None,
        read_only: bool = False,
        lock_timeout_s: float | None = LOCK_TIMEOUT_S,
    ) -> None:
        self.engine = engine
        self.path = path
        self.read_only = read_only
        self.lock_timeout_s = lock_timeout_s
        self.refusal: DatabaseError | None = None  # set once the file is known to be damaged
        self._last_trim = 0.0
        # One driver connection per thread for hot writes, kept open: a pool checkout and
        # check-in cost a third of a whole SQLite transaction.
        self._local = threading.local()
        self._hot_connections: list[Any] = []
        self._lock = threading.Lock()
        # PostgreSQL: the statement that wakes other machines at commit (see `postgres`).
        self.notify_sql: str | None = None

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @property
    def shares_files(self) -> bool:
        """Images and checkpoints also go into the database (`job_file`): machines share no
        disk. SQLite is one machine's store, where the local folders are enough."""
        return not self.is_sqlite

    @property
    def location(self) -> str:
        """What `open_database` takes to open this database again (e.g. in a worker process):
        the SQLite file, or the PostgreSQL URL as the user gave it."""
        if self.is_sqlite:
            return str(self.path if self.path is not None else self.engine.url.database)
        return self.engine.url.render_as_string(hide_password=False)

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that takes the write lock up front (SQLite: BEGIN IMMEDIATE).

        Taking it at BEGIN, not at the first write, means a read-then-write can never
        fail half way with "database is locked" after busy_timeout was skipped.
        """
        self._check_writable()
        with self.translated_errors(), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.translated_errors(), self.read_only_connection() as conn, conn.begin():
            yield conn

    def read_only_connection(self) -> Connection:
        """A connection whose transactions never take the write lock (SQLite: plain BEGIN).

        For callers that keep one open, e.g. to poll `data_version`, which only compares
        commits seen from the same connection. The caller closes it."""
        return self.engine.connect().execution_options(**{_READ_ONLY: True})

    @contextmanager
    def hot_write(self) -> Iterator[HotTransaction]:
        """`write()` for the hot paths: the driver's own cursor, statements compiled once.

        SQLAlchemy's per-statement execution costs several times what SQLite spends on the
        whole transaction; a claim or a transition runs thousands of times a second.
        """
        self._check_writable()
        with self.translated_errors():
            raw = self._hot_connection()
            cursor = raw.cursor()
            if self.is_sqlite:
                _begin_immediate(cursor, self.lock_timeout_s)
            try:
                yield HotTransaction(cursor, self.notify_sql)
                raw.commit()
            except BaseException:
                _rollback_quietly(raw)
                self._drop_if_broken(raw)
                raise

    @contextmanager
    def hot_read(self) -> Iterator[HotTransaction]:
        """A quick read on this thread's driver connection, without the write lock: what a
        worker asks once per denoising step, where Core's per-call cost would show."""
        with self.translated_errors():
            raw = self._hot_connection()
            try:
                yield HotTransaction(raw.cursor())
            except BaseException:
                self._drop_if_broken(raw)
                raise
            finally:
                # Ends PostgreSQL's implicit transaction (a snapshot held open would keep the
                # next read from seeing new commits); on SQLite nothing is open.
                _rollback_quietly(raw)

    def _drop_if_broken(self, raw: Any) -> None:
        """A connection the server closed (PostgreSQL restart, network) is dropped, so this
        thread's next hot write connects afresh."""
        if self.is_sqlite:
            return
        from app.models.postgres import is_broken

        if not is_broken(raw.dbapi_connection):
            return
        self._local.connection = None
        with self._lock:
            if raw in self._hot_connections:
                self._hot_connections.remove(raw)
        # The driver's connection, not `raw.close()`: that hands it to the pool's reset,
        # whose rollback fails on the dead socket and logs a traceback.
        with contextlib.suppress(Exception):
            raw.dbapi_connection.close()

    @property
    def patient(self) -> bool:
        """Waits out a held lock and a full disk instead of failing (a worker's database)."""
        return self.lock_timeout_s is None

    def in_hot_write(self, work: Callable[[HotTransaction], T]) -> T:
        """`work(tx)` in one `hot_write` transaction; its result.

        A patient database runs it again once there is room when the disk was full: the
        failed try rolled back, so nothing is doubled, and a worker neither dies nor fails
        its job for a full disk; it pauses on the write and carries on with its progress."""
        delay_s = 0.0
        while True:
            try:
                with self.hot_write() as tx:
                    result = work(tx)
            except DiskFull as error:
                if not self.patient:
                    raise
                if not delay_s:
                    log.warning("%s; waiting for space", error)
                delay_s = min(max(delay_s * 2, FULL_DISK_FIRST_WAIT_S), FULL_DISK_MAX_WAIT_S)
                time.sleep(delay_s)
                continue
            if delay_s:
                log.info("disk space is back; carrying on")
            return result

    def _check_writable(self) -> None:
        if self.refusal is not None:
            raise self.refusal
        if self.read_only:
            raise DatabaseReadOnly(
                f"The job database {self.path} is open read-only here; nothing was changed",
                self.path,
            )

    @contextmanager
    def translated_errors(self) -> Iterator[None]:
        """Raise SQLite's runtime errors as Easel's (`DatabaseLocked`, `DiskFull`, ...)."""
        try:
            yield
        except Exception as error:  # the driver's own errors too (the hot path's cursor)
            known = self._translate(error)
            if known is None:
                raise  # not one a user can act on: a bug, reported with its traceback
            if isinstance(known, DatabaseCorrupt):
                self.refusal = known
            raise known from error

    def _translate(self, error: BaseException) -> DatabaseError | None:
        driver_error = error.orig if isinstance(error, DBAPIError) else error
        if not self.is_sqlite:
            from app.models.postgres import translate_error

            return translate_error(driver_error or error, self.engine.url)
        if not isinstance(driver_error, sqlite3.Error):
            return None
        path = self.path or Path(str(self.engine.url.database))
        return translate_sqlite_error(driver_error, path, self.lock_timeout_s)

    def _hot_connection(self) -> Any:
        raw = getattr(self._local, "connection", None)
        if raw is None:
            raw = self.engine.raw_connection()
            raw.detach()  # this thread's for good, not the pool's
            if self.is_sqlite:
                raw.execute("PRAGMA busy_timeout=0")  # _begin_immediate does the waiting
            self._local.connection = raw
            with self._lock:
                self._hot_connections.append(raw)
        return raw

    def prepare(
        self, statement: ClauseElement, column_keys: Sequence[str] | None = None
    ) -> Prepared:
        """Compile a Core statement once for this database's dialect."""
        compiled: Any = statement.compile(
            dialect=self.engine.dialect, column_keys=list(column_keys) if column_keys else None
        )
        if compiled.positiontup is None:
            raise ValueError("hot-path statements need a positional driver (SQLite: qmark)")
        # Literals written into the statement (status='PROCESSING') become bound values too.
        fixed = {
            name: value
            for name, value in compiled.params.items()
            if not compiled.binds[name].required
        }
        return Prepared(compiled.string, tuple(compiled.positiontup), fixed)

    def data_version(self, conn: Connection) -> int:
        """A number that changes whenever another connection commits (cheap to poll)."""
        if not self.is_sqlite:
            raise NotImplementedError("data_version is only available on SQLite")
        return int(conn.exec_driver_sql("PRAGMA data_version").scalar_one())

    def trim_journal(self) -> None:
        """Fold the write-ahead log back into the database and truncate it (at idle).

        At most every few seconds, and never an error: a busy reader only postpones it."""
        now = time.monotonic()
        if not self.is_sqlite or self.read_only or now - self._last_trim < TRIM_JOURNAL_EVERY_S:
            return
        self._last_trim = now
        try:
            if Path(f"{self.path}-wal").stat().st_size == 0:
                return
            self._hot_connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except (OSError, sqlite3.Error) as error:
            log.debug("journal not trimmed: %s", error)

    def dispose(self) -> None:
        with self._lock:
            hot, self._hot_connections = self._hot_connections, []
        for raw in hot:
            raw.close()
        self._local = threading.local()
        self.engine.dispose()


@dataclass(frozen=True)
class Prepared:
    sql: str
    parameter_names: tuple[str, ...]
    fixed_values: Mapping[str, Any]


class HotTransaction:
    def __init__(self, cursor: Any, notify_sql: str | None = None) -> None:
        self._cursor = cursor
        self._notify_sql = notify_sql

    def notify(self, payload: str) -> None:
        """Wake listening workers on any machine once this transaction commits (PostgreSQL's
        NOTIFY is transactional); on SQLite, where everyone polls one file, nothing."""
        if self._notify_sql is not None:
            self._cursor.execute(self._notify_sql, (payload,))

    def execute(self, statement: Prepared, params: Mapping[str, Any]) -> Any:
        """Run on the driver cursor; returns it (rowcount, fetchone, description)."""
        fixed = statement.fixed_values
        values = [
            params[name] if name in params else fixed[name] for name in statement.parameter_names
        ]
        self._cursor.execute(statement.sql, values)
        return self._cursor


def open_database(
    path: Path | str,
    *,
    read_only: bool = False,
    lock_timeout_s: float | None = LOCK_TIMEOUT_S,
    check_integrity: bool = False,
) -> Database:
    """Open the database at `path` and bring its schema up to date (creating it if needed).

    `read_only`: never write, never take the write lock (works on a read-only folder and
    while another program holds the lock); an older schema is then migrated by a writable
    open first. `lock_timeout_s`: how long a write waits for the lock (`PATIENT`: as long
    as it takes). `check_integrity`: refuse a damaged file (`DatabaseCorrupt`) before use.

    `path` may also be a PostgreSQL URL (see `postgres`); the SQLite options do not apply.
    """
    from app.models import postgres  # it builds on this module

    if postgres.is_database_url(str(path)):
        return postgres.open_postgres(str(path))
    path = Path(path)
    if read_only and not path.exists():
        read_only = False  # nothing to read yet: create it like any first launch
    db = Database(
        _sqlite_engine(path, read_only=read_only, lock_timeout_s=lock_timeout_s),
        path=path, read_only=read_only, lock_timeout_s=lock_timeout_s,
    )  # fmt: skip
    try:
        if check_integrity:
            check_database(db)
        if read_only:
            if _read_version(db) != SCHEMA_VERSION:  # older: a writable open migrates it
                db.dispose()
                return open_database(path, lock_timeout_s=lock_timeout_s)
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
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()


def _busy_timeout_ms(lock_timeout_s: float | None) -> int:
    return _PATIENT_BUSY_TIMEOUT_MS if lock_timeout_s is None else int(lock_timeout_s * 1000)


def _connection_setup(busy_ms: int, *, read_only: bool) -> Callable[[Any, Any], None]:
    def configure(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event, not pysqlite, decide how transactions start.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        if not read_only:  # journal settings are the writer's business (and need writing)
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
            cursor.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT_BYTES}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return configure


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


def _rollback_quietly(raw: Any) -> None:
    try:
        raw.rollback()
    except Exception as error:  # the original error is the one worth reporting (the
        log.debug("rollback failed: %s", error)  # connection may be gone: psycopg raises)


def _is_busy(error: sqlite3.OperationalError) -> bool:
    return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY or "locked" in str(error)


def _begin_sqlite_transaction(conn: Connection) -> None:
    read_only = conn.get_execution_options().get(_READ_ONLY, False)
    # Straight to the driver: BEGIN needs none of SQLAlchemy's statement machinery.
    driver = conn.connection.driver_connection
    assert driver is not None
    driver.execute("BEGIN" if read_only else "BEGIN IMMEDIATE")


# --- schema version -------------------------------------------------------------------------

# version -> the step that brings a database at that version to version + 1.
Migration = Callable[[Connection], None]


def _v1_to_v2(conn: Connection) -> None:
    # Version 2 added the retry policy's "given up" flag and the watchdog's index.
    conn.exec_driver_sql("ALTER TABLE job ADD COLUMN given_up BOOLEAN NOT NULL DEFAULT 0")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_job_heartbeat ON job (status, heartbeat_at)"
    )


def _v2_to_v3(conn: Connection) -> None:
    # Version 3 stores whether a failure is transient in its own column (it was a prefix in
    # the message), and the folder a job's image was asked to go to (`generate --out`).
    conn.exec_driver_sql("ALTER TABLE job ADD COLUMN error_transient BOOLEAN")
    conn.exec_driver_sql("ALTER TABLE job ADD COLUMN output_dir VARCHAR")
    # Failures recorded before: the flag was the FAIL message's prefix. Read it one last
    # time, so a failure still waiting for the retry policy is decided as it was meant.
    conn.exec_driver_sql(
        "UPDATE job SET error_transient = EXISTS (SELECT 1 FROM job_transition t"
        " WHERE t.job_id = job.id AND t.attempt = job.attempt AND t.event = 'FAIL'"
        " AND t.message LIKE 'transient error: %') WHERE status = 'FAILED'"
    )


def _v3_to_v4(conn: Connection) -> None:
    # Version 4 added dependent jobs (job_parent) and img2img (job_input, two job columns).
    conn.exec_driver_sql("ALTER TABLE job ADD COLUMN init_image VARCHAR NOT NULL DEFAULT ''")
    conn.exec_driver_sql("ALTER TABLE job ADD COLUMN strength FLOAT NOT NULL DEFAULT 1.0")
    SQLModel.metadata.create_all(conn, tables=[JOB_PARENT, JOB_INPUT])


def _v4_to_v5(conn: Connection) -> None:
    # Version 5 made the history usable: favourites, word search over prompts, and the
    # indexes that searches by date, retention and stats over a period need.
    conn.exec_driver_sql("ALTER TABLE job ADD COLUMN starred BOOLEAN NOT NULL DEFAULT FALSE")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_job_created ON job (created_at)")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_job_finished ON job (finished_at)")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_transition_at ON job_transition (at)")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_job_rerun_of ON job (rerun_of)")
    create_search_index(conn)


def _v5_to_v6(conn: Connection) -> None:
    # Version 6 stores images and checkpoints in the database (job_file): no shared disk.
    SQLModel.metadata.create_all(conn, tables=[JOB_FILE])


def _v6_to_v7(conn: Connection) -> None:
    # Version 7 lists the worker processes of every machine (worker), for the Workers panel
    # and per-worker drain and stop.
    SQLModel.metadata.create_all(conn, tables=[WORKER])


def _v7_to_v8(conn: Connection) -> None:
    # Version 8 stores a cancel that can still be undone (job.cancel_after), so a window
    # that dies inside its undo time no longer leaves the job paused for ever. Only if it
    # is missing: like create_all in the steps before, it can meet a newer table.
    if "cancel_after" not in {column["name"] for column in inspect(conn).get_columns("job")}:
        conn.exec_driver_sql("ALTER TABLE job ADD COLUMN cancel_after FLOAT")


MIGRATIONS: dict[int, Migration] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8,
}


def ensure_schema(db: Database) -> int:
    """Create a new schema, migrate an older one, refuse a newer one. Returns the version.

    The version is read first without the write lock: an up-to-date database (nearly every
    open) never waits for, nor takes, the lock just to be opened."""
    if _read_version(db) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    with db.write() as conn:
        version = stored_version(conn)
        if version is None:
            SQLModel.metadata.create_all(conn)
            create_search_index(conn)
            _store_version(conn, SCHEMA_VERSION, insert=True)
            return SCHEMA_VERSION
        _refuse_newer(version)
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](conn)
            version += 1
        _store_version(conn, version, insert=False)
        return version


def _read_version(db: Database) -> int | None:
    version = stored_schema_version(db)
    if version is not None:
        _refuse_newer(version)
    return version


def _refuse_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"The job database was written by a newer Easel (schema {version}; this "
            f"version understands up to {SCHEMA_VERSION}). Update Easel, or point it at "
            "another data folder with EASEL_HOME or --home."
        )


def stored_schema_version(db: Database) -> int | None:
    with db.read() as conn:
        return stored_version(conn)


def stored_version(conn: Connection) -> int | None:
    """The schema version on `conn`'s database; None when it holds no Easel tables."""
    if not inspect(conn).has_table(SchemaInfo.__tablename__):
        return None
    return conn.execute(text("SELECT version FROM schema_info WHERE id = 1")).scalar_one_or_none()


def _store_version(conn: Connection, version: int, *, insert: bool) -> None:
    sql = (
        "INSERT INTO schema_info (id, version) VALUES (1, :v)"
        if insert
        else "UPDATE schema_info SET version = :v WHERE id = 1"
    )
    conn.execute(text(sql), {"v": version})


# --- SQLite's errors, by code -----------------------------------------------------------------


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


# --- integrity and backups ---------------------------------------------------------------------


def check_database(db: Database) -> None:
    """`PRAGMA quick_check`; a damaged file refuses every later write (`DatabaseCorrupt`).

    Linear in the file's size (see benchmarks/integrity.py for its cost): run where a
    process starts to use the database, not on every transaction."""
    if not db.is_sqlite:
        return
    with db.read() as conn:
        problems = [str(row) for row in conn.exec_driver_sql("PRAGMA quick_check").scalars()]
    if problems != ["ok"]:
        # SQLite's first finding may span lines ("*** in database main ***\nPage 31: ...").
        detail = " ".join(problems[0].split())
        db.refusal = corrupt_database(db.path or Path("?"), detail)
        raise db.refusal


def backups_dir(db_path: Path) -> Path:
    return db_path.parent / BACKUP_FOLDER


def list_backups(db_path: Path) -> list[Path]:
    """Backups of the database at `db_path`, oldest first."""
    return sorted(backups_dir(db_path).glob(f"{db_path.stem}-*.db"))


def back_up(db: Database, *, keep: int = BACKUPS_KEPT, now: float | None = None) -> Path:
    """A consistent copy with SQLite's online backup API, e.g. `backups/easel-20261130-193000.db`;
    only the newest `keep` are kept. Take it after `check_database`: a damaged copy must
    never push out a good one."""
    assert db.path is not None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    folder = backups_dir(db.path)
    target = folder / f"{db.path.stem}-{stamp}.db"
    partial = target.with_suffix(".partial")
    with db.translated_errors():
        folder.mkdir(exist_ok=True)
        source = sqlite3.connect(f"file:{quote(str(db.path.resolve()))}?mode=ro", uri=True)
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)
        finally:
            copy.close()
            source.close()
        os.replace(partial, target)
    for old in list_backups(db.path)[:-keep]:
        old.unlink(missing_ok=True)
    return target


def restore_backup(db_path: Path, backup: Path | None = None) -> tuple[Path, Path]:
    """Put `backup` (default: the newest) in place of the database; the file it replaces is
    kept beside it as `<name>.damaged-<time>`. Returns (backup used, where the old file went).
    Only while no Easel process has the database open."""
    backups = list_backups(db_path)
    chosen = backup or (backups[-1] if backups else None)
    if chosen is None or not chosen.is_file():
        where = chosen or backups_dir(db_path)
        raise DatabaseError(f"There is no backup to restore at {where}", db_path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    set_aside = db_path.with_name(f"{db_path.name}.damaged-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        current = Path(f"{db_path}{suffix}")
        if current.exists():
            os.replace(current, Path(f"{set_aside}{suffix}"))
    partial = db_path.with_suffix(".restoring")
    shutil.copyfile(chosen, partial)
    os.replace(partial, db_path)
    return chosen, set_aside


# --- compaction ---------------------------------------------------------------------------------


def compact(db: Database) -> None:
    """Give the pages freed by large deletes (a prune) back to the disk.

    A database made with auto_vacuum=INCREMENTAL frees them cheaply; an older one is
    converted once by a full VACUUM (which needs as much free disk as the file)."""
    if not db.is_sqlite:
        return  # PostgreSQL's autovacuum does this on its own
    db._check_writable()
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
