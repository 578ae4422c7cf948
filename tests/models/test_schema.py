"""Schema versions: new databases are stamped, older ones migrated, newer ones refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.errors import DatabaseCorrupt
from app.models.migrations import SCHEMA_VERSION, SchemaTooNew, stored_schema_version
from app.models.opening import open_database

# The schema as version 1 shipped it: no given_up flag, no heartbeat index.
V1_SCHEMA = """
CREATE TABLE job (
    id INTEGER PRIMARY KEY, prompt VARCHAR NOT NULL, negative_prompt VARCHAR NOT NULL,
    model VARCHAR NOT NULL, scheduler VARCHAR NOT NULL, steps INTEGER NOT NULL,
    cfg FLOAT NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL, seed INTEGER NOT NULL,
    status VARCHAR(16) NOT NULL, version INTEGER NOT NULL, attempt INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL, priority INTEGER NOT NULL, worker_id VARCHAR,
    heartbeat_at FLOAT, not_before FLOAT, progress_step INTEGER NOT NULL,
    progress_total INTEGER NOT NULL, created_at FLOAT NOT NULL, updated_at FLOAT NOT NULL,
    started_at FLOAT, finished_at FLOAT, output_path VARCHAR, error VARCHAR,
    checkpoint_path VARCHAR, rerun_of INTEGER REFERENCES job (id)
);
CREATE INDEX ix_job_claim ON job (status, priority, id);
CREATE INDEX ix_job_status_id ON job (status, id);
CREATE TABLE job_transition (
    id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES job (id), attempt INTEGER NOT NULL,
    from_status VARCHAR(16), to_status VARCHAR(16) NOT NULL, event VARCHAR(16) NOT NULL,
    source VARCHAR NOT NULL, message VARCHAR NOT NULL, at FLOAT NOT NULL
);
CREATE INDEX ix_transition_job ON job_transition (job_id, id);
CREATE TABLE schema_info (id INTEGER PRIMARY KEY, version INTEGER NOT NULL);
INSERT INTO schema_info VALUES (1, 1);
INSERT INTO job VALUES (1, 'an old cat', '', 'easel-tiny', 'Euler', 20, 5.0, 64, 64, 3,
    'PAUSED', 1, 1, 3, 0, NULL, NULL, NULL, 7, 20, 100.0, 101.0, NULL, NULL, NULL, NULL,
    '/data/checkpoints/1.ckpt', NULL);
INSERT INTO job_transition VALUES (1, 1, 1, NULL, 'PENDING', 'SUBMIT', 'user', '', 100.0);
INSERT INTO job_transition VALUES (2, 1, 1, 'PENDING', 'PAUSED', 'PAUSE', 'user', '', 101.0);
"""


# Version 2 added the given_up flag and the heartbeat index.
V1_TO_V2 = """
ALTER TABLE job ADD COLUMN given_up BOOLEAN NOT NULL DEFAULT 0;
CREATE INDEX ix_job_heartbeat ON job (status, heartbeat_at);
UPDATE schema_info SET version = 2;
"""


def write_sqlite(path: Path, script: str) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.commit()
    conn.close()


def test_a_new_database_is_stamped_with_the_current_version(tmp_path: Path) -> None:
    db = open_database(tmp_path / "new.db")
    assert stored_schema_version(db) == SCHEMA_VERSION
    db.dispose()


def test_a_new_database_uses_wal(tmp_path: Path) -> None:
    db = open_database(tmp_path / "wal.db")
    with db.read() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar_one() == 2  # FULL
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one() > 0
    db.dispose()


def test_a_version_1_database_is_migrated_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    write_sqlite(path, V1_SCHEMA)
    db = open_database(path)
    assert stored_schema_version(db) == SCHEMA_VERSION
    queue = JobQueue(db)
    old = queue.get(1)
    assert (old.prompt, old.status, old.progress_step, old.given_up) == (
        "an old cat",
        "PAUSED",
        7,
        False,
    )
    assert [t.event for t in queue.timeline(1)] == ["SUBMIT", "PAUSE"]
    queue.resume(1)
    new_id = queue.submit(GenerationParams("a new dog"))
    assert queue.get(new_id).status == "PENDING"
    with db.read() as conn:
        indexes = {row[1] for row in conn.exec_driver_sql("PRAGMA index_list(job)")}
    assert "ix_job_heartbeat" in indexes
    db.dispose()


def test_a_newer_database_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    open_database(path).dispose()
    write_sqlite(path, f"UPDATE schema_info SET version = {SCHEMA_VERSION + 1}")
    with pytest.raises(SchemaTooNew, match=rf"newer Easel \(schema {SCHEMA_VERSION + 1};"):
        open_database(path)
    conn = sqlite3.connect(path)  # and nothing was changed
    assert conn.execute("SELECT version FROM schema_info").fetchone() == (SCHEMA_VERSION + 1,)
    conn.close()


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database " * 100)
    with pytest.raises(DatabaseCorrupt, match=r"notes.db is damaged \(file is not a database\)"):
        open_database(path)
    assert path.read_text().startswith("these are my notes")


# Two failures as version 2 recorded them: the transient flag was a prefix of the message.
V2_FAILURES = """
INSERT INTO job SELECT 2, 'oom', '', 'easel-tiny', 'Euler', 20, 5.0, 64, 64, 3, 'FAILED', 2, 1,
    3, 0, NULL, NULL, NULL, 7, 20, 100.0, 101.0, NULL, NULL, NULL, 'MemoryError: oom', NULL,
    NULL, 0;
INSERT INTO job SELECT 3, 'bug', '', 'easel-tiny', 'Euler', 20, 5.0, 64, 64, 3, 'FAILED', 2, 1,
    3, 0, NULL, NULL, NULL, 7, 20, 100.0, 101.0, NULL, NULL, NULL, 'ValueError: bug', NULL,
    NULL, 0;
INSERT INTO job_transition VALUES (3, 2, 1, 'PROCESSING', 'FAILED', 'FAIL', 'worker',
    'transient error: MemoryError: oom', 101.0);
INSERT INTO job_transition VALUES (4, 3, 1, 'PROCESSING', 'FAILED', 'FAIL', 'worker',
    'error: ValueError: bug', 101.0);
"""


def test_a_version_2_database_gains_the_transient_flag_and_output_folder(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    write_sqlite(path, V1_SCHEMA + V1_TO_V2 + V2_FAILURES)
    db = open_database(path)
    assert stored_schema_version(db) == SCHEMA_VERSION
    queue = JobQueue(db)
    old = queue.get(1)
    assert (old.prompt, old.status, old.error_transient, old.output_dir) == (
        "an old cat",
        "PAUSED",
        None,
        None,
    )
    assert [queue.get(i).error_transient for i in (2, 3)] == [True, False]  # read once, kept
    new_id = queue.submit(GenerationParams("a new dog"), output_dir=tmp_path / "out")
    assert queue.get(new_id).output_dir == str(tmp_path / "out")
    db.dispose()
