"""A database from before dependent jobs is migrated and can hold chains and init images."""

from __future__ import annotations

from pathlib import Path

from app.engine.jobs.graph import init_image_of, parents_of
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.models.migrations import SCHEMA_VERSION, stored_schema_version
from app.models.opening import open_database

from .test_schema import V1_SCHEMA, write_sqlite


def test_an_old_database_gains_the_job_graph_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    write_sqlite(path, V1_SCHEMA)
    db = open_database(path)
    assert stored_schema_version(db) == SCHEMA_VERSION
    queue = JobQueue(db)
    old = queue.get(1)
    assert (old.prompt, old.init_image, old.strength) == ("an old cat", "", 1.0)
    png = b"an init image"
    params = GenerationParams("a cat", init_image=digest(png), strength=0.5, steps=4)
    child = queue.submit(params, parents=[1], inputs=RunInputs(init_image=png))
    assert queue.get(child).status == "BLOCKED"
    assert parents_of(queue, child) == [1]
    assert init_image_of(queue, queue.get(child)) == png
    db.dispose()
