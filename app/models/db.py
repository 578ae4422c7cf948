"""The database: one engine, its units of work, and the seam to the store behind it.

`Database` speaks portable SQLAlchemy (and, on the hot paths, the driver's own cursor).
What differs between SQLite and PostgreSQL is asked of its `Dialect`, chosen once when the
database is opened (`app.models.opening`): `app.models.sqlite` and `app.models.postgres`
implement it. The schema versions live in `app.models.migrations`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.expression import ClauseElement

from app.errors import (
    DatabaseCorrupt,
    DatabaseError,
    DatabaseReadOnly,
    DatabaseUnreachable,
    DiskFull,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000
LOCK_TIMEOUT_S = BUSY_TIMEOUT_MS / 1000  # how long a write waits for the lock by default
PATIENT = None  # lock_timeout_s for workers: wait for the lock as long as it takes
# SQLite's `synchronous` on every connection Easel opens. FULL: a commit (an acknowledged
# submit, a result; not a claim, see `Dialect.unsynced`) is on the disk when it returns, in
# WAL mode too; under NORMAL it survives a crash of the app but, as SQLite documents, may
# roll back after a power cut or an OS crash. The variable exists only so benchmarks can
# measure what FULL costs.
SYNCHRONOUS_ENV = "EASEL_SQLITE_SYNCHRONOUS"
_SYNCHRONOUS_CHOICES = ("FULL", "EXTRA", "NORMAL")
# The execution option of `Database.read_only_connection`: its transactions never take the
# write lock (the SQLite engine's "begin" listener reads it).
READ_ONLY_OPTION = "easel_read_only"
FULL_DISK_FIRST_WAIT_S, FULL_DISK_MAX_WAIT_S = 0.5, 10.0
STOP_WAITING_CHECK_S = 0.05  # a wait for disk space notices `stop_waiting` this quickly


def sqlite_synchronous() -> str:
    """FULL, unless $EASEL_SQLITE_SYNCHRONOUS names another of SQLite's durable-enough
    levels (EXTRA) or, for a benchmark's comparison only, NORMAL."""
    chosen = os.environ.get(SYNCHRONOUS_ENV, "").strip().upper()
    return chosen if chosen in _SYNCHRONOUS_CHOICES else "FULL"


class Dialect(Protocol):
    """What differs between the stores; everything else in `Database` is the same on both.

    `shares_files`: images and checkpoints also go into the database (`job_file`), because
    machines share no disk. `notify_sql`: the statement that, run in a transaction, wakes
    listening workers on other machines once it commits (one `%s`/`?` for the payload);
    None where everyone polls one file."""

    @property
    def shares_files(self) -> bool: ...

    @property
    def notify_sql(self) -> str | None: ...

    @property
    def serialise_sql(self) -> str | None:
        """`serialise` for a hot transaction: the statement (one `%s`/`?` for the key) that
        holds other hot transactions asking for the same key back until this one ends; None
        where the write lock taken at BEGIN already does."""
        ...

    def location(self, db: Database) -> str:
        """What `open_database` takes to open `db` again (e.g. in a worker process)."""
        ...

    def set_up_hot_connection(self, raw: Any) -> None:
        """Ready a driver connection that one thread keeps for its hot writes."""
        ...

    def dispose(self) -> None:
        """Let go of what the dialect holds open for its database."""
        ...

    def begin_hot_write(self, cursor: Any, lock_timeout_s: float | None) -> None:
        """Start a write transaction on a hot connection's cursor, taking the write lock."""
        ...

    def numbered_cursor(self, cursor: Any) -> Any:
        """A cursor on `cursor`'s connection for `Prepared.numbered` SQL (PostgreSQL)."""
        ...

    def unsynced(self, raw: Any) -> AbstractContextManager[None]:
        """Around a hot write whose commit need not be on the disk when it returns (see
        `Database.hot_write`'s `synced`): SQLite commits it without waiting for the disk;
        a server's commit is as it is (its workers are on other machines)."""
        ...

    def writers_turn(self, db: Database) -> AbstractContextManager[None]:
        """Around a hot write: wait in line with this machine's other hot writers (or not at
        all), so that a freed write lock goes to the next of them at once."""
        ...

    def pipeline(self, raw: Any) -> AbstractContextManager[Any]:
        """Statements on a hot connection sent without waiting for each answer, until one
        is read (PostgreSQL's pipeline mode: one round trip for several); nothing where the
        store is in this process."""
        ...

    def alone(self, raw: Any) -> AbstractContextManager[None]:
        """Around a hot write of one statement that is a whole transaction (a server-side
        function's call): sent without a BEGIN and a COMMIT of its own, one round trip;
        nothing on SQLite, whose hot writes begin their own transaction."""
        ...

    def ensure_function(self, db: Database, name: str, definition: str) -> bool:
        """Whether the store has the server-side function `name`, created from `definition`
        (`CREATE FUNCTION ...`) where it was missing; False where the store has none
        (SQLite) or this user may not create it."""
        ...

    def translate(self, error: BaseException, db: Database) -> DatabaseError | None:
        """The Easel error for a driver error a user can act on; None for a bug."""
        ...

    def is_broken(self, driver_connection: Any) -> bool:
        """Whether the server or the network closed this connection (drop it, reconnect)."""
        ...

    def data_version(self, conn: Connection) -> int:
        """A number that changes whenever another connection commits (cheap to poll)."""
        ...

    def trim_journal(self, db: Database) -> None:
        """Give the disk back what the store's journal took while busy (called at idle)."""
        ...

    def check_integrity(self, db: Database) -> None:
        """Refuse a damaged store (`DatabaseCorrupt`, and every later write with it)."""
        ...

    def compact(self, db: Database) -> None:
        """Give the space freed by large deletes back to the disk."""
        ...

    def server_time(self, conn: Connection) -> float | None:
        """The store's own clock (Unix seconds), which every machine on it shares; None
        where the store is one machine's file and that machine's clock is the only one."""
        ...

    @property
    def has_clock(self) -> bool:
        """Whether `server_time` answers: a server's clock, shared by every machine on it."""
        ...

    def serialise(self, conn: Connection, key: int) -> None:
        """Until `conn`'s transaction ends, no other transaction that asks for `key` runs
        (they wait): for a read-then-write that two machines must not interleave."""
        ...


class Outage:
    """Whether this process can reach the store, as it last found out: one warning when
    the server goes away, one line when it is back, instead of a line (or a traceback)
    per failed heartbeat, listen or poll. Every unit of work reports here (see
    `Database.translated_errors`); `ended_at` tells a watchdog not to judge heartbeats
    that nobody could write (see `app.engine.workers.watchdog`)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._since: float | None = None  # when the outage in progress began (monotonic)
        self.ended_at: float | None = None  # when the last one ended (monotonic), if any

    def began(self, error: DatabaseUnreachable) -> None:
        with self._lock:
            if self._since is not None:
                return
            self._since = self._monotonic()
        log.warning("%s", error)  # once: `ended` says when it is back

    def ended(self) -> None:
        if self._since is None:  # the hot paths' case: no lock taken
            return
        with self._lock:
            if self._since is None:
                return
            now = self._monotonic()
            lasted_s, self._since, self.ended_at = now - self._since, None, now
        log.info("the job database is reachable again (away for %.0f s)", lasted_s)


_OUTAGES: dict[str, Outage] = {}
_OUTAGES_LOCK = threading.Lock()


def outage_of(store: str) -> Outage:
    """One per store and process: a worker opens its database more than once (its own
    connection, the command's for the watchdog), and says an outage once, not once each."""
    with _OUTAGES_LOCK:
        return _OUTAGES.setdefault(store, Outage())


class Database:
    """One engine plus the two kinds of unit of work: `write()` and `read()`.

    The driver's runtime errors leave here translated by the dialect into `app.errors`
    (locked, disk full, read-only, corrupt, I/O, unreachable); anything else is a bug and
    stays raw. After a corruption is seen, every further write is refused: the file stays
    as it is.
    """

    def __init__(
        self,
        engine: Engine,
        dialect: Dialect,
        *,
        path: Path | None = None,
        read_only: bool = False,
        lock_timeout_s: float | None = LOCK_TIMEOUT_S,
    ) -> None:
        self.engine = engine
        self.dialect = dialect
        self.path = path
        self.read_only = read_only
        self.lock_timeout_s = lock_timeout_s
        self.refusal: DatabaseError | None = None  # set once the file is known to be damaged
        # A patient database waits for disk space until this says to stop (a worker told to
        # stop by SIGTERM must not sit in that wait for ever): the write then raises DiskFull.
        self.stop_waiting: Callable[[], bool] = _never
        # One driver connection per thread for hot writes, kept open: a pool checkout and
        # check-in cost a third of a whole SQLite transaction.
        self._local = threading.local()
        self._hot_connections: list[Any] = []
        # Those of threads that ended (`release_hot_connection`), for the next thread's.
        self._spare_hot_connections: list[Any] = []
        self._lock = threading.Lock()
        self.outage = outage_of(str(engine.url))
        self._functions: dict[str, bool] = {}  # `ensure_function`'s answers

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @property
    def shares_files(self) -> bool:
        """Images and checkpoints also go into the database (`job_file`): machines share no
        disk. SQLite is one machine's store, where the local folders are enough."""
        return self.dialect.shares_files

    @property
    def location(self) -> str:
        """What `open_database` takes to open this database again (e.g. in a worker process):
        the SQLite file, or the PostgreSQL URL as the user gave it."""
        return self.dialect.location(self)

    @contextmanager
    def write(self, *, synced: bool = True) -> Iterator[Connection]:
        """A transaction that takes the write lock up front (SQLite: BEGIN IMMEDIATE).

        Taking it at BEGIN, not at the first write, means a read-then-write can never
        fail half way with "database is locked" after busy_timeout was skipped.
        `synced=False`: its commit does not wait for the disk (`Dialect.unsynced`), for a
        row that is harmless to lose with the processes that wrote it: a worker's own row.
        """
        self.check_writable()
        with self.translated_errors(), self.engine.connect() as conn:
            raw = conn.connection
            unsynced = contextlib.nullcontext() if synced else self.dialect.unsynced(raw)
            with unsynced, conn.begin():
                yield conn

    @contextmanager
    def serialised_write(self, key: int) -> Iterator[Connection]:
        """`write`, that no other `serialised_write(key)` on any machine runs beside: SQLite's
        write lock, taken at BEGIN, already is one; PostgreSQL reads committed rows, so two
        of them would both see what the other is about to change, and take a lock."""
        with self.write() as conn:
            self.dialect.serialise(conn, key)
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.translated_errors(), self.read_only_connection() as conn, conn.begin():
            yield conn

    def read_only_connection(self) -> Connection:
        """A connection whose transactions never take the write lock (SQLite: plain BEGIN).

        For callers that keep one open, e.g. to poll `data_version`, which only compares
        commits seen from the same connection. The caller closes it."""
        return self.engine.connect().execution_options(**{READ_ONLY_OPTION: True})

    @contextmanager
    def hot_write(
        self, *, pipelined: bool = False, synced: bool = True, alone: bool = False
    ) -> Iterator[HotTransaction]:
        """`write()` for the hot paths: the driver's own cursor, statements compiled once.

        SQLAlchemy's per-statement execution costs several times what SQLite spends on the
        whole transaction; a claim or a transition runs thousands of times a second.
        `pipelined`: statements whose answer is not read yet (and the commit) travel to a
        database server together (`Dialect.pipeline`), for a transaction that holds a lock
        others wait for: each round trip less is time less that they wait.
        `synced=False`: a commit that a power cut may undo, for a write that is harmless to
        lose with the processes that made it (`Dialect.unsynced`): a claim.
        `alone`: the work is one statement that is a transaction of its own, a server-side
        function's call (`Dialect.alone`): one round trip, where a BEGIN and a COMMIT cost
        a round trip each on PostgreSQL.
        """
        self.check_writable()
        with self.translated_errors(), self.dialect.writers_turn(self):
            raw = self.hot_connection()
            unsynced = contextlib.nullcontext() if synced else self.dialect.unsynced(raw)
            own_transaction = self.dialect.alone(raw) if alone else contextlib.nullcontext()
            with unsynced, own_transaction:
                cursor = raw.cursor()
                self.dialect.begin_hot_write(cursor, self.lock_timeout_s)
                try:
                    with self.dialect.pipeline(raw) if pipelined else contextlib.nullcontext():
                        yield HotTransaction(
                            cursor,
                            self.dialect.notify_sql,
                            self.dialect.serialise_sql,
                            self.dialect.numbered_cursor,
                        )
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
            raw = self.hot_connection()
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
        if not self.dialect.is_broken(raw.dbapi_connection):
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

    def in_hot_write(
        self,
        work: Callable[[HotTransaction], T],
        *,
        pipelined: bool = False,
        synced: bool = True,
        alone: bool = False,
    ) -> T:
        """`work(tx)` in one `hot_write` transaction; its result.

        A patient database runs it again once there is room when the disk was full: the
        failed try rolled back, so nothing is doubled, and a worker neither dies nor fails
        its job for a full disk; it pauses on the write and carries on with its progress."""
        delay_s = 0.0
        while True:
            try:
                with self.hot_write(pipelined=pipelined, synced=synced, alone=alone) as tx:
                    result = work(tx)
            except DiskFull as error:
                if not self.patient or self.stop_waiting():
                    raise
                if not delay_s:
                    log.warning("%s; waiting for space", error)
                delay_s = min(max(delay_s * 2, FULL_DISK_FIRST_WAIT_S), FULL_DISK_MAX_WAIT_S)
                if not self._wait_for_space(delay_s):
                    log.warning("stopped waiting for disk space: %s", error)
                    raise
                continue
            if delay_s:
                log.info("disk space is back; carrying on")
            return result

    def _wait_for_space(self, delay_s: float) -> bool:
        """Sleep `delay_s` in short naps; False as soon as `stop_waiting` says to stop."""
        deadline = time.monotonic() + delay_s
        while (left := deadline - time.monotonic()) > 0:
            if self.stop_waiting():
                return False
            time.sleep(min(STOP_WAITING_CHECK_S, left))
        return not self.stop_waiting()

    def check_writable(self) -> None:
        """Raise what refuses every write here: a damaged file, or a read-only open."""
        if self.refusal is not None:
            raise self.refusal
        if self.read_only:
            raise DatabaseReadOnly(
                f"The job database {self.path} is open read-only here; nothing was changed",
                self.path,
            )

    @contextmanager
    def translated_errors(self) -> Iterator[None]:
        """Raise the driver's runtime errors as Easel's (`DatabaseLocked`, `DiskFull`, ...)."""
        try:
            yield
        except Exception as error:  # the driver's own errors too (the hot path's cursor)
            known = self._translate(error)
            if known is None:
                raise  # not one a user can act on: a bug, reported with its traceback
            if isinstance(known, DatabaseCorrupt):
                self.refusal = known
            if isinstance(known, DatabaseUnreachable):
                self.outage.began(known)
            raise known from error
        else:
            self.outage.ended()

    def _translate(self, error: BaseException) -> DatabaseError | None:
        driver_error = error.orig if isinstance(error, DBAPIError) else error
        return self.dialect.translate(driver_error or error, self)

    def hot_connection(self) -> Any:
        """This thread's own driver connection, kept open: one a thread that ended left
        (`release_hot_connection`), else the pool's, detached for good."""
        raw = getattr(self._local, "connection", None)
        if raw is None:
            with self._lock:
                raw = self._spare_hot_connections.pop() if self._spare_hot_connections else None
            if raw is None:
                raw = self.engine.raw_connection()
                raw.detach()  # hot writes' for good, not the pool's
                self.dialect.set_up_hot_connection(raw)
                with self._lock:
                    self._hot_connections.append(raw)
            self._local.connection = raw
        return raw

    def release_hot_connection(self) -> None:
        """The calling thread is about to end: its hot connection goes to the next thread
        that needs one. A job's heartbeat thread lives one job, and a worker kept each one's
        connection open for good (two file descriptors a job on SQLite, until it hit the
        process's limit), taking the pool's idle one so that the next job opened another
        (an SQLite open, its setup and a sync of the folder: milliseconds every job)."""
        raw = getattr(self._local, "connection", None)
        if raw is None:
            return
        self._local.connection = None
        with self._lock:
            if raw in self._hot_connections:  # not dropped as broken meanwhile
                self._spare_hot_connections.append(raw)

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
        names = tuple(compiled.positiontup)
        if self.engine.dialect.name == "postgresql" and (
            len(compiled.string) > DRIVER_CACHED_SQL_CHARS or len(names) > DRIVER_CACHED_PARAMS
        ):
            sql, names = numbered_placeholders(compiled.string, names)
            return Prepared(sql, names, fixed, numbered=True)
        return Prepared(compiled.string, names, fixed)

    def prepare_once(
        self,
        name: str,
        build: Callable[[], ClauseElement],
        column_keys: Sequence[str] | None = None,
    ) -> Prepared:
        """`prepare(build(), column_keys)`, compiled once per process and kind of database:
        `name` must say everything `build` depends on. Compiling the queue's statements
        took most of the 40 ms a new `JobQueue` cost, paid by every worker, window, command
        and test that opens a store; the SQL is the same for every store of one dialect."""
        engine_dialect = self.engine.dialect
        key = (
            name, tuple(column_keys or ()), engine_dialect.name, engine_dialect.driver,
            engine_dialect.paramstyle, engine_dialect.server_version_info,
        )  # fmt: skip
        prepared = _PREPARED.get(key)
        if prepared is None:
            prepared = _PREPARED[key] = self.prepare(build(), column_keys)
        return prepared

    def ensure_function(self, name: str, definition: str) -> bool:
        """Whether the store has the server-side function `name` (created from `definition`
        if missing; asked of the server once per name and `Database`)."""
        known = self._functions.get(name)
        if known is None:
            known = self._functions[name] = self.dialect.ensure_function(self, name, definition)
        return known

    def data_version(self, conn: Connection) -> int:
        """A number that changes whenever another connection commits (cheap to poll)."""
        return self.dialect.data_version(conn)

    def server_time(self) -> float | None:
        """The store's own clock, shared by every machine on it; None for a local file,
        asked nothing (see `app.engine.jobs.clock.StoreClock`)."""
        if not self.dialect.has_clock:
            return None
        with self.read() as conn:
            return self.dialect.server_time(conn)

    def trim_journal(self) -> None:
        """Give back the disk the journal took while busy (at idle; never an error)."""
        self.dialect.trim_journal(self)

    def dispose(self) -> None:
        with self._lock:
            hot, self._hot_connections = self._hot_connections, []
            self._spare_hot_connections = []
        for raw in hot:
            raw.close()
        self.dialect.dispose()
        self._local = threading.local()
        self.engine.dispose()


# `Database.prepare_once`: (name, columns, dialect) -> the statement compiled for it. Prepared
# is immutable, so stores and threads share it; a race compiles twice, harmlessly.
_PREPARED: dict[tuple[object, ...], Prepared] = {}


# psycopg converts a statement's `%s` to `$1..` again at every call once it is longer than
# this or has more parameters (its cache leaves such ones out): the claim's did, ~0.1 ms of
# client CPU a claim. Those are sent numbered, as the server takes them (`numbered`).
DRIVER_CACHED_SQL_CHARS = 4096
DRIVER_CACHED_PARAMS = 50


@dataclass(frozen=True)
class Prepared:
    sql: str
    parameter_names: tuple[str, ...]
    fixed_values: Mapping[str, Any]
    # PostgreSQL: `$1..` placeholders, one per distinct name, for the driver's raw cursor.
    numbered: bool = False


def numbered_placeholders(sql: str, names: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """`format`-style SQL (`%s` per use of a name, `%%` a percent sign) with `$n` placeholders
    instead, one per distinct name: (the SQL, the names in `$n` order)."""
    distinct = tuple(dict.fromkeys(names))
    uses = iter(names)
    numbered = re.sub(
        r"%[s%]",
        lambda found: "%" if found[0] == "%%" else f"${distinct.index(next(uses)) + 1}",
        sql,
    )
    return numbered, distinct


class HotTransaction:
    def __init__(
        self,
        cursor: Any,
        notify_sql: str | None = None,
        serialise_sql: str | None = None,
        numbered_cursor: Callable[[Any], Any] | None = None,
    ) -> None:
        self._cursor = cursor
        self._notify_sql = notify_sql
        self._serialise_sql = serialise_sql
        self._numbered_cursor = numbered_cursor

    def serialise(self, key: int) -> None:
        """Until this transaction ends, no other that asks for `key` runs (they wait), on
        any machine: SQLite's write lock, taken at BEGIN, already is one."""
        if self._serialise_sql is not None:
            self._cursor.execute(self._serialise_sql, (key,))

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
        cursor = self._cursor
        if statement.numbered:
            assert self._numbered_cursor is not None, "numbered SQL outside a hot write"
            cursor = self._numbered_cursor(cursor)  # a fresh one: its answer may be read later
        cursor.execute(statement.sql, values)
        return cursor


def check_database(db: Database) -> None:
    """Refuse a damaged store (`DatabaseCorrupt`): SQLite's `PRAGMA quick_check`; a damaged
    file then refuses every later write. PostgreSQL's server looks after its own pages.

    Linear in the file's size (see benchmarks/integrity.py for its cost): run where a
    process starts to use the database, not on every transaction."""
    db.dialect.check_integrity(db)


def compact(db: Database) -> None:
    """Give the pages freed by large deletes (a prune) back to the disk (SQLite; PostgreSQL's
    autovacuum does this on its own)."""
    db.dialect.compact(db)


def _never() -> bool:
    return False


def _rollback_quietly(raw: Any) -> None:
    try:
        raw.rollback()
    except Exception as error:  # the original error is the one worth reporting (the
        log.debug("rollback failed: %s", error)  # connection may be gone: psycopg raises)
