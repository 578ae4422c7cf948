"""Favourites: the star is stored with the job and in its PNG, which otherwise stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from app.engine.history.favourites import star
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobNotFound, JobQueue
from app.engine.outputs.image import write_png
from app.engine.outputs.png_star import png_is_starred, set_png_star
from app.models.opening import open_database
from tests.easel_png import read_png_params


def finished_job_with_image(tmp_path: Path) -> tuple[JobQueue, int, Path]:
    queue = JobQueue(open_database(tmp_path / "easel.db"))
    params = GenerationParams("a red circle", width=64, height=64, seed=7)
    job_id = queue.submit(params)
    image = tmp_path / "out" / f"{job_id}.png"
    write_png(Image.new("RGB", (64, 64), "red"), image, params)
    with queue.db.write() as conn:  # fixture: the image a finished job left
        conn.exec_driver_sql("UPDATE job SET output_path = ? WHERE id = ?", (str(image), job_id))
    return queue, job_id, image


def test_starring_marks_the_job_and_its_png_and_unstarring_undoes_both(tmp_path: Path) -> None:
    queue, job_id, image = finished_job_with_image(tmp_path)
    pixels = Image.open(image).tobytes()
    timeline = queue.timeline(job_id)

    assert star(queue, job_id) == image
    assert queue.get(job_id).starred and png_is_starred(image)
    assert Image.open(image).tobytes() == pixels  # the picture is untouched
    assert read_png_params(image).prompt == "a red circle"  # and so is its other metadata
    assert queue.timeline(job_id) == timeline  # a star is not a status change

    star(queue, job_id, on=False)
    assert not queue.get(job_id).starred and not png_is_starred(image)
    queue.db.dispose()


def test_starring_twice_keeps_one_star_chunk(tmp_path: Path) -> None:
    _queue, _job_id, image = finished_job_with_image(tmp_path)
    set_png_star(image, True)
    once = image.read_bytes()
    set_png_star(image, True)
    assert image.read_bytes() == once
    _queue.db.dispose()


def test_a_missing_image_still_stars_the_job(tmp_path: Path) -> None:
    queue, job_id, image = finished_job_with_image(tmp_path)
    image.unlink()
    assert star(queue, job_id) is None
    assert queue.get(job_id).starred
    queue.db.dispose()


def test_an_unknown_job_is_refused(tmp_path: Path) -> None:
    queue = JobQueue(open_database(tmp_path / "easel.db"))
    with pytest.raises(JobNotFound):
        star(queue, 99)
    queue.db.dispose()
