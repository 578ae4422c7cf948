"""Schema 8 -> 9 (inpaint): a database with img2img jobs gains the mask columns and
several inputs per job, and its init images stay readable; on both backends."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import inspect, text

from app.engine.jobs.graph import init_image_of, mask_of
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database

INIT, MASK = b"\x89PNG init bytes", b"\x89PNG mask bytes"


def _upload(png: bytes) -> str:
    return "upload:" + hashlib.sha256(png).hexdigest()


def _back_to_version_8(db_location: str) -> int:
    """A database as version 8 left it, holding an img2img job with its init image."""
    db = open_database(db_location)
    params = GenerationParams("an old cat", init_image=_upload(INIT), strength=0.5)
    job_id = JobQueue(db).submit(params, inputs=RunInputs(init_image=INIT))
    blob = "BYTEA" if not db.is_sqlite else "BLOB"
    with db.write() as conn:
        for column in ("mask", "mask_blur", "only_masked", "mask_padding"):
            conn.execute(text(f"ALTER TABLE job DROP COLUMN {column}"))
        conn.execute(text("ALTER TABLE job_input RENAME TO job_input_v9"))
        if not db.is_sqlite:
            conn.execute(
                text("ALTER TABLE job_input_v9 RENAME CONSTRAINT job_input_pkey TO v9_pkey")
            )
        conn.execute(text(
            f"CREATE TABLE job_input (job_id INTEGER NOT NULL REFERENCES job (id), "
            f"png {blob} NOT NULL, PRIMARY KEY (job_id))"
        ))  # fmt: skip
        conn.execute(text("INSERT INTO job_input SELECT job_id, png FROM job_input_v9"))
        conn.execute(text("DROP TABLE job_input_v9"))
        conn.execute(text("UPDATE schema_info SET version = 8"))
    db.dispose()
    return job_id


@pytest.mark.both_backends
def test_a_version_8_database_gains_masks_and_keeps_its_init_images(db_location: str) -> None:
    old_job = _back_to_version_8(db_location)
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION
        with db.read() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("job_input")}
            primary = inspect(conn).get_pk_constraint("job_input")["constrained_columns"]
        assert "kind" in columns and set(primary) == {"job_id", "kind"}
        queue = JobQueue(db)
        job = queue.get(old_job)
        assert (job.mask, job.mask_blur, job.only_masked, job.mask_padding) == ("", 4, False, 32)
        assert init_image_of(queue, job) == INIT and mask_of(queue, job) is None
        params = GenerationParams(
            "a new cat", init_image=_upload(INIT), mask=_upload(MASK), only_masked=True
        )
        new_job = queue.get(queue.submit(params, inputs=RunInputs(INIT, MASK)))
        assert init_image_of(queue, new_job) == INIT and mask_of(queue, new_job) == MASK
        assert new_job.only_masked
    finally:
        db.dispose()
