"""The schema version: new databases are stamped, older ones migrated, newer ones refused.

The same steps run on SQLite and PostgreSQL; `open_database` calls `ensure_schema` (on
PostgreSQL under a lock that keeps two machines from migrating at once).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, inspect, text
from sqlmodel import SQLModel

from app.errors import DatabaseError
from app.models.db import Database
from app.models.search_index import create_search_index
from app.models.tables import (
    API_JOB,
    JOB_FILE,
    JOB_GROUP,
    JOB_INPUT,
    JOB_NOTE,
    JOB_PARENT,
    QUEUE_SECRET,
    QUEUED_ONLY,
    REQUEST_KEY,
    WORKER,
    SchemaInfo,
)

SCHEMA_VERSION = 23


class SchemaTooNew(DatabaseError):
    pass


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


def _v8_to_v9(conn: Connection) -> None:
    # Version 9 serves the queue over HTTP (issue 22): clients' Idempotency-Keys
    # (request_key) and what a client asked of each job it submitted (api_job: its name,
    # the callback URL told of the final status, how that delivery went).
    SQLModel.metadata.create_all(conn, tables=[REQUEST_KEY, API_JOB])


def _v9_to_v10(conn: Connection) -> None:
    # Version 10 makes claims model-aware (app/engine/jobs/affinity.py): each job counts how
    # often a claim passed it over for another model and since when (the fairness bound),
    # and each worker row lists the models that worker holds. Only what is missing: the
    # worker table may have been created by an earlier step of this same upgrade.
    def missing(table: str, names: tuple[str, ...]) -> list[str]:
        have = {column["name"] for column in inspect(conn).get_columns(table)}
        return [name for name in names if name not in have]

    added = {
        "passed_over": "INTEGER NOT NULL DEFAULT 0",
        "passed_over_at": "FLOAT",
    }
    for name in missing("job", tuple(added)):
        conn.exec_driver_sql(f"ALTER TABLE job ADD COLUMN {name} {added[name]}")
    if missing("worker", ("models",)):
        conn.exec_driver_sql("ALTER TABLE worker ADD COLUMN models VARCHAR")


def _v10_to_v11(conn: Connection) -> None:
    # Version 11 adds inpaint: the job's mask settings (four job columns) and several inputs
    # per job (job_input.kind in its primary key: "init" for the init images stored so far,
    # "mask" for masks).
    columns = {column["name"] for column in inspect(conn).get_columns("job")}
    for name, ddl in (
        ("mask", "VARCHAR NOT NULL DEFAULT ''"),
        ("mask_blur", "INTEGER NOT NULL DEFAULT 4"),
        ("only_masked", "BOOLEAN NOT NULL DEFAULT FALSE"),
        ("mask_padding", "INTEGER NOT NULL DEFAULT 32"),
    ):
        if name not in columns:
            conn.exec_driver_sql(f"ALTER TABLE job ADD COLUMN {name} {ddl}")
    if "kind" in {column["name"] for column in inspect(conn).get_columns("job_input")}:
        return
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "ALTER TABLE job_input ADD COLUMN kind VARCHAR(16) NOT NULL DEFAULT 'init'"
        )
        conn.exec_driver_sql("ALTER TABLE job_input DROP CONSTRAINT job_input_pkey")
        conn.exec_driver_sql("ALTER TABLE job_input ADD PRIMARY KEY (job_id, kind)")
        return
    # SQLite cannot change a primary key in place: the table is made again, rows copied.
    conn.exec_driver_sql("ALTER TABLE job_input RENAME TO job_input_v8")
    SQLModel.metadata.create_all(conn, tables=[JOB_INPUT])
    conn.exec_driver_sql(
        "INSERT INTO job_input (job_id, kind, png) SELECT job_id, 'init', png FROM job_input_v8"
    )
    conn.exec_driver_sql("DROP TABLE job_input_v8")


# Schema 12's job columns, with their SQL (the same on SQLite and PostgreSQL).
_V12_JOB_COLUMNS = {
    "variation_seed": "BIGINT NOT NULL DEFAULT -1",
    "variation_strength": "FLOAT NOT NULL DEFAULT 0.0",
    "prompt_template": "VARCHAR NOT NULL DEFAULT ''",
    "kind": "VARCHAR(16) NOT NULL DEFAULT 'generate'",
    "upscaler": "VARCHAR NOT NULL DEFAULT ''",
    "group_id": "INTEGER",
    "group_cell": "INTEGER",
}


def _v11_to_v12(conn: Connection) -> None:
    # Version 12 adds groups of jobs (issue 27): a batch, a grid or a wildcard expansion is
    # a job_group row its jobs point at (job.group_id, job.group_cell); a grid waits for its
    # cells to be settled, not to succeed (job_parent.settled); and the job columns of
    # variation seeds, wildcard templates, job kinds (generate, grid, upscale) and upscaler
    # models. Only what is missing: like create_all in the steps before, it can meet a
    # newer table.
    have = {column["name"] for column in inspect(conn).get_columns("job")}
    for name, sql in _V12_JOB_COLUMNS.items():
        if name not in have:
            conn.exec_driver_sql(f"ALTER TABLE job ADD COLUMN {name} {sql}")
    edges = {column["name"] for column in inspect(conn).get_columns("job_parent")}
    if "settled" not in edges:
        conn.exec_driver_sql(
            "ALTER TABLE job_parent ADD COLUMN settled BOOLEAN NOT NULL DEFAULT FALSE"
        )
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_job_group ON job (group_id, group_cell)")
    SQLModel.metadata.create_all(conn, tables=[JOB_GROUP])


def _v12_to_v13(conn: Connection) -> None:
    # Version 13 adds guidance: the job's ControlNet layers and IP-Adapter reference images
    # (a JSON text column each); their images are job_input rows of kind "control0", ...
    # and "reference0", ... (no change there).
    columns = {column["name"] for column in inspect(conn).get_columns("job")}
    for name in ("control", "reference"):
        if name not in columns:
            conn.exec_driver_sql(f"ALTER TABLE job ADD COLUMN {name} TEXT NOT NULL DEFAULT ''")


def _v13_to_v14(conn: Connection) -> None:
    # Version 14 adds job notes: facts about a job that are not status changes, shown in
    # its timeline (each try of an HTTP callback and how it went).
    SQLModel.metadata.create_all(conn, tables=[JOB_NOTE])


def _v14_to_v15(conn: Connection) -> None:
    # Version 15 keeps the queue's secrets (queue_secret): the key that signs callbacks,
    # shared by every server on the queue (issue 34).
    SQLModel.metadata.create_all(conn, tables=[QUEUE_SECRET])


_V16_JOB_COLUMNS = {
    "speed": "VARCHAR(16) NOT NULL DEFAULT 'off'",
    "speed_threshold": "FLOAT NOT NULL DEFAULT 0.0",
}


def _v15_to_v16(conn: Connection) -> None:
    # Version 16 adds step caching (issue 40): the job's speed setting and its threshold.
    columns = {column["name"] for column in inspect(conn).get_columns("job")}
    for name, sql in _V16_JOB_COLUMNS.items():
        if name not in columns:
            conn.exec_driver_sql(f"ALTER TABLE job ADD COLUMN {name} {sql}")


def _v16_to_v17(conn: Connection) -> None:
    # Version 17 adds compiled models (issue 40): whether a job runs its model compiled.
    columns = {column["name"] for column in inspect(conn).get_columns("job")}
    if "compile" not in columns:
        conn.exec_driver_sql("ALTER TABLE job ADD COLUMN compile BOOLEAN NOT NULL DEFAULT FALSE")


_V18_JOB_COLUMNS = {
    "frames": "INTEGER NOT NULL DEFAULT 1",
    "fps": "INTEGER NOT NULL DEFAULT 16",
}


def _v17_to_v18(conn: Connection) -> None:
    # Version 18 adds video jobs (issue 38): a clip's frame count and frames a second.
    columns = {column["name"] for column in inspect(conn).get_columns("job")}
    for name, sql in _V18_JOB_COLUMNS.items():
        if name not in columns:
            conn.exec_driver_sql(f"ALTER TABLE job ADD COLUMN {name} {sql}")


def _v18_to_v19(conn: Connection) -> None:
    # Version 19 indexes the queued jobs alone, in the order they go (issue 41): the
    # model-aware claim's window, which PostgreSQL read through the primary key once its
    # statistics said most jobs were queued, past every job claimed before (17 ms a claim
    # after 3,000 claims of 10,000 instead of 0.3).
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_job_queue ON job (status, priority DESC, id)"
        f" WHERE {QUEUED_ONLY}"
    )


def _v19_to_v20(conn: Connection) -> None:
    # Version 20 adds a job's schedule over its model's (issue 37: a few-step LoRA's shift).
    columns = {column["name"] for column in inspect(conn).get_columns("job")}
    if "scheduler_config" not in columns:
        conn.exec_driver_sql("ALTER TABLE job ADD COLUMN scheduler_config TEXT NOT NULL DEFAULT ''")


def _v20_to_v21(conn: Connection) -> None:
    # Version 21 lets an edit read several input images (Qwen-Image-Edit Plus, issue 37):
    # those after its init image, named in a JSON text column; their images are job_input
    # rows of kind "edit0", "edit1", ... (no change there).
    columns = {column["name"] for column in inspect(conn).get_columns("job")}
    if "edit_images" not in columns:
        conn.exec_driver_sql("ALTER TABLE job ADD COLUMN edit_images TEXT NOT NULL DEFAULT ''")


def _v21_to_v22(conn: Connection) -> None:
    # Version 22 adds first-and-last-frame clips (issue 38): a video's last image.
    columns = {column["name"] for column in inspect(conn).get_columns("job")}
    if "last_image" not in columns:
        conn.exec_driver_sql("ALTER TABLE job ADD COLUMN last_image VARCHAR NOT NULL DEFAULT ''")


def _v22_to_v23(conn: Connection) -> None:
    # Version 23 weighs a clip's images (issue 38: LTX-Video 0.9.5+'s conditioning
    # strengths) and places its last image at a frame; older jobs keep stock's 1 and last.
    columns = {column["name"] for column in inspect(conn).get_columns("job")}
    added = {
        "image_strength": "FLOAT NOT NULL DEFAULT 1.0",
        "last_image_strength": "FLOAT NOT NULL DEFAULT 1.0",
        "last_image_frame": "INTEGER NOT NULL DEFAULT -1",
    }
    for name, kind in added.items():
        if name not in columns:
            conn.exec_driver_sql(f"ALTER TABLE job ADD COLUMN {name} {kind}")


MIGRATIONS: dict[int, Migration] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8,
    8: _v8_to_v9,
    9: _v9_to_v10,
    10: _v10_to_v11,
    11: _v11_to_v12,
    12: _v12_to_v13,
    13: _v13_to_v14,
    14: _v14_to_v15,
    15: _v15_to_v16,
    16: _v16_to_v17,
    17: _v17_to_v18,
    18: _v18_to_v19,
    19: _v19_to_v20,
    20: _v20_to_v21,
    21: _v21_to_v22,
    22: _v22_to_v23,
}


def ensure_schema(db: Database) -> int:
    """Create a new schema, migrate an older one, refuse a newer one. Returns the version.

    The version is read first without the write lock: an up-to-date database (nearly every
    open) never waits for, nor takes, the lock just to be opened."""
    if read_version(db) == SCHEMA_VERSION:
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


def read_version(db: Database) -> int | None:
    """The stored version, read without the write lock; a newer one is refused."""
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
