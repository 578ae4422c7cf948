"""Schema 9 -> 10 (ControlNet): a database with jobs gains the control column; control
images are stored with their jobs (job_input, kind "control<i>"), checked at submit, read
back by a worker's helper and kept by a re-run; on both backends."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest
from sqlalchemy import inspect, text

from app.engine.jobs.graph import control_images_of, init_image_of, reference_images_of
from app.engine.jobs.params import (
    ControlLayer,
    GenerationParams,
    InvalidParameters,
    ReferenceImage,
    encode_control,
    encode_reference,
)
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.states import JobStatus
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database

INIT, EDGES, POSE = b"\x89PNG init bytes", b"\x89PNG edges", b"\x89PNG pose"
STYLE = b"\x89PNG style"


def _upload(png: bytes) -> str:
    return "upload:" + hashlib.sha256(png).hexdigest()


def _controlled(*pngs: bytes) -> GenerationParams:
    layers = [ControlLayer(_upload(png), f"net-{i}", "canny", 0.5, 0.0, 0.8) for i, png in
              enumerate(pngs)]  # fmt: skip
    return GenerationParams("a posed cat", control=encode_control(layers))


def _referenced(png: bytes) -> str:
    return encode_reference([ReferenceImage(_upload(png), "ip-adapter_sd15", 0.6)])


@pytest.mark.both_backends
def test_a_version_12_database_gains_control_layers_and_keeps_its_jobs(db_location: str) -> None:
    db = open_database(db_location)
    params = GenerationParams("an old cat", init_image=_upload(INIT), strength=0.5)
    old_job = JobQueue(db).submit(params, inputs=RunInputs(init_image=INIT))
    with db.write() as conn:
        conn.execute(text("ALTER TABLE job DROP COLUMN control"))
        conn.execute(text("ALTER TABLE job DROP COLUMN reference"))
        conn.execute(text("UPDATE schema_info SET version = 12"))
    db.dispose()
    db = open_database(db_location)
    try:
        assert stored_schema_version(db) == SCHEMA_VERSION
        with db.read() as conn:
            assert {"control", "reference"} <= {c["name"] for c in inspect(conn).get_columns("job")}
        queue = JobQueue(db)
        job = queue.get(old_job)
        assert job.control == "" and control_images_of(queue, job) == ()
        assert job.reference == "" and reference_images_of(queue, job) == ()
        assert init_image_of(queue, job) == INIT
        guided = replace(_controlled(EDGES, POSE), reference=_referenced(STYLE))
        inputs = RunInputs(control_images=[EDGES, POSE], reference_images=[STYLE])
        new_job = queue.get(queue.submit(guided, inputs=inputs))
        assert control_images_of(queue, new_job) == (EDGES, POSE)
        assert reference_images_of(queue, new_job) == (STYLE,)
        layers = GenerationParams("x", control=new_job.control).control_layers
        assert [(layer.model, layer.weight, layer.end) for layer in layers] == [
            ("net-0", 0.5, 0.8), ("net-1", 0.5, 0.8),
        ]  # fmt: skip
    finally:
        db.dispose()


def test_control_images_must_match_their_layers_and_nothing_is_stored_otherwise(
    db_location: str,
) -> None:
    db = open_database(db_location)
    try:
        queue = JobQueue(db)
        with pytest.raises(InvalidParameters, match="2 control layers named, but 1 images given"):
            queue.submit(_controlled(EDGES, POSE), inputs=RunInputs(control_images=[EDGES]))
        with pytest.raises(
            InvalidParameters, match="control layer 1's image is not the one it names"
        ):
            queue.submit(_controlled(EDGES, POSE), inputs=RunInputs(control_images=[EDGES, EDGES]))
        bad = GenerationParams("a cat", control=encode_control([ControlLayer(_upload(EDGES), "n",
                               end=1.5)]))  # fmt: skip
        with pytest.raises(InvalidParameters, match="start and end must satisfy"):
            queue.submit(bad, inputs=RunInputs(control_images=[EDGES]))
        assert sum(queue.count_by_status().values()) == 0
    finally:
        db.dispose()


def test_a_rerun_keeps_the_control_images(db_location: str) -> None:
    db = open_database(db_location)
    try:
        queue = JobQueue(db)
        job_id = queue.submit(_controlled(POSE), inputs=RunInputs(control_images=[POSE]))
        queue.cancel(job_id)
        assert JobStatus(queue.get(job_id).status) is JobStatus.CANCELLED
        again = queue.get(queue.rerun(job_id))
        assert again.control == queue.get(job_id).control
        assert control_images_of(queue, again) == (POSE,)
        with pytest.raises(InvalidParameters, match="1 reference images named, but 0 images given"):
            queue.submit(GenerationParams("a cat", reference=_referenced(STYLE)))
    finally:
        db.dispose()
