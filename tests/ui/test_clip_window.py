"""A finished video job in the window: its clip plays when the job is shown (from the list
or the gallery), Enter plays it again from the start (the image viewer shows pictures),
and its menus save it as an animated GIF or WebP or start a new picture from a frame."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from pytestqt.qtbot import QtBot

from app.engine.jobs.params import KIND_VIDEO, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.ui.widgets.window import MainWindow
from tests.ui.helpers import noting
from tests.ui.test_clip_player import FPS, FRAMES, SIDE, frame_of, write_clip
from tests.ui.test_keyboard import list_with

pytestmark = pytest.mark.timeout(60)
TIMEOUT_MS = 5000


def finished_clip(queue: JobQueue, folder: Path) -> int:
    """A video job finished with a real MP4 (and its first-frame PNG) as its output."""
    params = GenerationParams("a lantern swinging", width=SIDE, height=SIDE, kind=KIND_VIDEO)
    job_id = queue.submit(replace(params, frames=FRAMES, fps=FPS))
    clip = write_clip(folder / f"{job_id:06d}-1.mp4")
    queue.claim("w")
    queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id="w",
               changes={"output_path": str(clip)})  # fmt: skip
    return job_id


def playing(qtbot: QtBot, window: MainWindow) -> None:
    player = window.image.player
    qtbot.waitUntil(lambda: player.playing and len(player.frames) == FRAMES, timeout=TIMEOUT_MS)


def test_a_shown_clip_plays_and_enter_plays_it_from_the_start(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    job_id = finished_clip(queue, tmp_path)
    list_with(qtbot, window, job_id)
    playing(qtbot, window)
    player = window.image.player
    assert window.image.caption.text().endswith(f"· {FRAMES} frames at {FPS} fps")
    image_menu = window.mask_editing.menu
    assert image_menu is not None
    shown = [a.text() for a in image_menu.actions() if a.isVisible() and a.text()]
    assert shown[-3:] == ["Save as GIF…", "Save as WebP…", "Use frame as init image"]
    player.pause()
    player.seek(FRAMES - 1)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Return)  # the viewer's key: here, play
    assert window.viewing.viewer is None
    assert player.playing and player.index <= 1
    window.image.canvas.double_clicked.emit()  # a clip's double click opens no viewer
    assert window.viewing.viewer is None


def test_enter_in_the_gallery_plays_a_clip(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    finished_clip(queue, tmp_path)
    gallery = window.gallery
    qtbot.waitUntil(lambda: window.gallery_model.rowCount() == 1, timeout=TIMEOUT_MS)
    gallery.setFocus()
    gallery.setCurrentIndex(window.gallery_model.index(0))
    qtbot.keyClick(gallery, Qt.Key.Key_Return)
    playing(qtbot, window)
    assert window.viewing.viewer is None


def test_save_as_gif_and_webp_where_the_dialog_says(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    job_id = finished_clip(queue, tmp_path)
    list_with(qtbot, window, job_id)
    playing(qtbot, window)
    asked: list[str] = []

    def answer(_parent: object, _title: str, suggested: str, _filter: str) -> str:
        asked.append(suggested)
        return str(tmp_path / "for the client")  # typed without the suffix

    window.clips.ask_path = answer
    for action, suffix in ((window.image.save_gif, ".gif"), (window.image.save_webp, ".webp")):
        action.trigger()
        assert asked[-1] == str(tmp_path / f"{job_id:06d}-1{suffix}")  # beside the clip
        saved = tmp_path / f"for the client{suffix}"
        qtbot.waitUntil(noting(window, f"Saved {saved}"), timeout=TIMEOUT_MS)
        with Image.open(saved) as animation:
            assert getattr(animation, "n_frames", 1) == FRAMES and animation.info["loop"] == 0


def test_use_frame_as_init_image_takes_the_frame_shown(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    job_id = finished_clip(queue, tmp_path)
    list_with(qtbot, window, job_id)
    playing(qtbot, window)
    canvas = window.image.canvas
    qtbot.mouseClick(canvas, Qt.MouseButton.LeftButton)  # pause, and the keys go to it
    qtbot.keyClick(canvas, Qt.Key.Key_Home)
    for _ in range(4):
        qtbot.keyClick(canvas, Qt.Key.Key_Period)
    window.prompt.prompt.setPlainText("my own words")
    window.image.use_frame.trigger()
    qtbot.waitUntil(lambda: window.prompt.init is not None, timeout=TIMEOUT_MS)
    init = window.prompt.init
    assert init is not None and init.source == f"#{job_id}, frame 5"
    assert (init.width, init.height) == (SIDE, SIDE)  # full size, from the clip itself
    assert frame_of(QImage.fromData(init.png)) == 4
    assert window.prompt.prompt.toPlainText() == "my own words"  # only the image changes
