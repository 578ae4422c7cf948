"""The gallery shows each output as its kind says: its thumbnail made from what the kind
gives (an image's own file, a clip's first frame), its badge, and whether the image viewer
steps through it; the follow-ups that start from a picture ask the kind too."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QPixmap
from pytestqt.qtbot import QtBot

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.states import JobStatus
from app.engine.outputs.kinds import OutputKind
from app.engine.outputs.registry import output_of_job
from app.ui.itemmodels.gallery_model import GalleryModel
from app.ui.itemmodels.job_list_model import BADGE_ROLE
from app.ui.presenters.actions import Action, applies
from app.ui.presenters.rows import JobRow
from app.ui.qt.dbthread import InlineRunner
from app.ui.qt.thumbnails import ThumbnailCache
from tests.engine.outputs.clip_kind import CLIP_FRAME_COLOUR, CLIP_JOB_KIND, register_clip

pytestmark = pytest.mark.timeout(60)
IMAGE_COLOUR = (20, 90, 220)


@pytest.fixture
def clip(monkeypatch: pytest.MonkeyPatch) -> OutputKind:
    return register_clip(monkeypatch)


def finished_row(job_id: int, job_kind: str, folder: Path) -> JobRow:
    params = GenerationParams(f"job {job_id}", seed=job_id, kind=job_kind)
    path = output_of_job(job_kind).path_in(folder, job_id, job_id)
    output_of_job(job_kind).write(Image.new("RGB", (64, 64), IMAGE_COLOUR), path, params)
    return JobRow(
        id=job_id, params=params, status=JobStatus.SUCCESS, attempt=1, max_attempts=3,
        given_up=False, priority=0, progress_step=1, progress_total=1, created_at=time.time(),
        started_at=None, finished_at=None, output_path=str(path), error=None, rerun_of=None,
        version=0,
    )  # fmt: skip


def colour_of(pixmap: QPixmap) -> tuple[int, int, int]:
    pixel = pixmap.toImage().pixelColor(pixmap.width() // 2, pixmap.height() // 2)
    return pixel.red(), pixel.green(), pixel.blue()


def test_the_gallery_shows_each_output_as_its_kind_says(
    qtbot: QtBot, tmp_path: Path, clip: OutputKind
) -> None:
    model = GalleryModel(ThumbnailCache(InlineRunner()))
    image_row = finished_row(2, "generate", tmp_path)
    clip_row = finished_row(1, CLIP_JOB_KIND, tmp_path)
    model.set_rows([image_row, clip_row])
    image_at, clip_at = model.index(0), model.index(1)
    for index in (image_at, clip_at):  # the first ask starts the load; inline, it is done
        assert model.data(index, Qt.ItemDataRole.DecorationRole) is None
    image_thumb = model.data(image_at, Qt.ItemDataRole.DecorationRole)
    clip_thumb = model.data(clip_at, Qt.ItemDataRole.DecorationRole)
    assert isinstance(image_thumb, QPixmap) and colour_of(image_thumb) == IMAGE_COLOUR
    # The clip's file is no picture: its thumbnail is the frame its kind gives.
    assert isinstance(clip_thumb, QPixmap) and colour_of(clip_thumb) == CLIP_FRAME_COLOUR
    assert (model.data(image_at, BADGE_ROLE), model.data(clip_at, BADGE_ROLE)) == ("", "▶")
    assert model.paths() == [image_row.output_path]  # the viewer takes pictures only


def test_a_row_of_a_kind_this_easel_does_not_make_shows_without_a_picture(
    qtbot: QtBot, tmp_path: Path, clip: OutputKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = finished_row(1, CLIP_JOB_KIND, tmp_path)
    monkeypatch.undo()  # the clip kind unregistered: a newer Easel's job
    model = GalleryModel(ThumbnailCache(InlineRunner()))
    model.set_rows([row])
    index = model.index(0)
    model.data(index, Qt.ItemDataRole.DecorationRole)  # starts (and, inline, ends) the load
    assert model.data(index, Qt.ItemDataRole.DecorationRole) is None
    assert model.data(index, BADGE_ROLE) == "" and model.paths() == []


def test_follow_ups_that_start_from_a_picture_ask_the_kind(
    tmp_path: Path, clip: OutputKind
) -> None:
    image_row = finished_row(2, "generate", tmp_path)
    clip_row = finished_row(1, CLIP_JOB_KIND, tmp_path)
    for action in (Action.USE_AS_INIT, Action.UPSCALE, Action.VARY):
        assert (applies(action, image_row), applies(action, clip_row)) == (True, False)
    assert applies(Action.SHOW_IN_FOLDER, clip_row)  # any file can be shown in its folder
