"""An image made on another machine, held only in the PostgreSQL job database (`job_file`),
is shown, listed in the gallery and opened in the viewer like a local one."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from pytestqt.qtbot import QtBot
from sqlalchemy import update

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.engine.outputs.image import IMAGE
from app.engine.settings import load_settings
from app.engine.store.stored_files import FETCHED_FOLDER, store_file
from app.models.tables import JOB
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import FakeWorkers

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.parametrize("backend", ["postgresql"], indirect=True),
]

TIMEOUT_MS = 10_000
ELSEWHERE = "gpu-box:41:c0ffee"


def made_on_another_machine(queue: JobQueue, folder: Path) -> int:
    """A job finished by a worker on "gpu-box", whose folder this machine cannot see."""
    job_id = queue.submit(GenerationParams("a red field", steps=10, seed=7))
    job = queue.claim(ELSEWHERE, job_id=job_id)
    assert job is not None
    image = folder / f"{job_id:06d}-7.png"
    folder.mkdir(parents=True)
    Image.new("RGB", (64, 48), "red").save(image)
    assert store_file(queue.db, job, IMAGE.file_kind, image, worker_id=ELSEWHERE,
                      claim=job.version)  # fmt: skip
    queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id=ELSEWHERE,
               changes={"output_path": str(image)})  # fmt: skip
    shutil.rmtree(folder)  # gone from here: it only ever was on gpu-box
    return job_id


def test_an_image_only_in_the_database_is_shown_in_the_gallery_and_viewer(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    workers: FakeWorkers,
    queue: JobQueue,
    tmp_path: Path,
) -> None:
    job_id = made_on_another_machine(queue, tmp_path / "gpu-box")
    workers.claiming = False
    window = make_window()
    fetched = load_settings().outputs_path() / FETCHED_FOLDER / f"{job_id:06d}-7.png"
    qtbot.waitUntil(lambda: window.vm.jobs.row_of(job_id) is not None, timeout=TIMEOUT_MS)
    window.jobs.select_jobs([job_id])
    qtbot.waitUntil(lambda: window.image.path == str(fetched), timeout=TIMEOUT_MS)
    shown = window.image.canvas.image
    assert shown is not None and (shown.width(), shown.height()) == (64, 48)
    assert shown.pixelColor(10, 10).name() == "#ff0000"
    with Image.open(fetched) as copy:
        assert copy.getpixel((0, 0)) == (255, 0, 0)

    qtbot.waitUntil(lambda: window.gallery_model.paths() == [str(fetched)], timeout=TIMEOUT_MS)
    index = window.gallery_model.index(0)
    qtbot.waitUntil(lambda: window.gallery_model.data(index, 1) is not None, timeout=TIMEOUT_MS)

    row = window.vm.jobs.job(job_id)
    assert row is not None
    window.viewing.open_image(row)
    viewer = window.viewing.viewer
    assert viewer is not None
    qtbot.waitUntil(viewer.isVisible, timeout=TIMEOUT_MS)
    assert viewer.paths[viewer.index] == str(fetched)
    assert (viewer.image.width(), viewer.image.height()) == (64, 48)


def test_a_peer_row_naming_a_picture_outside_the_outputs_folder_is_never_shown(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    workers: FakeWorkers,
    queue: JobQueue,
    tmp_path: Path,
) -> None:
    """A peer on the shared queue points a job's image at a private picture on this disk:
    the window shows the database's copy, and never reads the picture the row names."""
    job_id = made_on_another_machine(queue, tmp_path / "gpu-box")
    private = tmp_path / "private" / "photo.png"
    private.parent.mkdir()
    Image.new("RGB", (8, 8), "blue").save(private)
    with queue.db.write() as conn:
        conn.execute(update(JOB).where(JOB.c.id == job_id).values(output_path=str(private)))
    workers.claiming = False
    window = make_window()
    fetched = load_settings().outputs_path() / FETCHED_FOLDER / f"{job_id:06d}-7.png"
    qtbot.waitUntil(lambda: window.vm.jobs.row_of(job_id) is not None, timeout=TIMEOUT_MS)
    row = window.vm.jobs.job(job_id)
    assert row is not None and row.output_path == str(fetched)
    window.jobs.select_jobs([job_id])
    qtbot.waitUntil(lambda: window.image.path == str(fetched), timeout=TIMEOUT_MS)
