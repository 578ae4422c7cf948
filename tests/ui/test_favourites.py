"""Favourites as an artist reaches for them (issue 28.7): a Starred filter, the star on every
thumbnail, and cancelled jobs kept out of Done."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.ui.itemmodels.job_list_model import ROW_ROLE
from app.ui.presenters.actions import Action
from app.ui.presenters.rows import ListFilter
from app.ui.widgets.window import MainWindow
from tests.ui.helpers import job_in
from tests.ui.test_keyboard import finished_job, list_with

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000


def filter_button(window: MainWindow, name: ListFilter):  # type: ignore[no-untyped-def]
    return next(b for b in window.jobs.filters.buttons() if b.property("filter") == name.value)


def shown_ids(window: MainWindow) -> set[int]:
    return {row.id for row in window.vm.jobs.rows()}


def test_the_starred_filter_shows_favourites_and_the_gallery_shows_their_star(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    kept = finished_job(queue, tmp_path / "kept.png", "red")
    other = finished_job(queue, tmp_path / "other.png", "blue")
    queued = job_in(queue, JobStatus.PENDING)
    list_with(qtbot, window, kept)
    star = window.image.follow_ups[Action.STAR]
    qtbot.waitUntil(star.isEnabled, timeout=TIMEOUT_MS)
    qtbot.mouseClick(star, Qt.MouseButton.LeftButton)  # the star under the image
    qtbot.waitUntil(lambda: queue.get(kept).starred, timeout=TIMEOUT_MS)
    gallery = window.gallery_model

    def gallery_star(job_id: int) -> bool | None:
        for i in range(gallery.rowCount()):
            row = gallery.index(i).data(ROW_ROLE)
            if row.id == job_id:
                return bool(row.starred)
        return None

    qtbot.waitUntil(lambda: gallery_star(kept) is True, timeout=TIMEOUT_MS)
    assert gallery_star(other) is False
    button = filter_button(window, ListFilter.STARRED)
    assert button.text() == "★ Starred"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shown_ids(window) == {kept}, timeout=TIMEOUT_MS)
    assert queued not in shown_ids(window)
    window.jobs.select_jobs([kept])
    window.jobs.trigger(Action.STAR)  # unstarred from the list: it leaves the filter
    qtbot.waitUntil(lambda: shown_ids(window) == set(), timeout=TIMEOUT_MS)
    qtbot.mouseClick(filter_button(window, ListFilter.ALL), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shown_ids(window) == {kept, other, queued}, timeout=TIMEOUT_MS)


def test_the_viewer_shows_the_settings_beside_the_image_and_compares_two(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    older = finished_job(queue, tmp_path / "older.png", "blue")
    newer = finished_job(queue, tmp_path / "newer.png", "red")
    info = PngInfo()
    info.add_text("parameters", "a red field\nSteps: 20, Sampler: Euler, Seed: 7")
    Image.new("RGB", (64, 48), "red").save(tmp_path / "newer.png", pnginfo=info)
    qtbot.waitUntil(lambda: len(window.gallery_model.paths()) == 2, timeout=TIMEOUT_MS)
    list_with(qtbot, window, newer, older)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_Return)
    viewer = window.viewing.viewer
    assert viewer is not None
    qtbot.waitUntil(viewer.isVisible, timeout=TIMEOUT_MS)
    viewer.activateWindow()
    qtbot.waitUntil(viewer.isActiveWindow, timeout=TIMEOUT_MS)
    assert viewer.details.toPlainText() == "a red field\nSteps: 20, Sampler: Euler, Seed: 7"
    qtbot.keyClick(viewer, Qt.Key.Key_C)  # pin this one for comparison
    assert viewer.left.isVisible() and viewer.pinned_path == str(tmp_path / "newer.png")
    qtbot.keyClick(viewer, Qt.Key.Key_Right)  # the other result beside it
    assert viewer.path == str(tmp_path / "older.png")
    assert viewer.left.pixmap().size() == viewer.picture.pixmap().size()  # the same scale
    assert viewer.details.toPlainText() == "No settings in this file"
    qtbot.keyClick(viewer, Qt.Key.Key_C)  # and let it go
    assert not viewer.left.isVisible()


def test_delete_from_the_gallery_with_undo_then_for_good(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Issue 28.7: Delete on a thumbnail takes it out at once and offers Undo; Undo brings
    it back; the next Delete, once the undo time is over, removes the job and its image."""
    from app.engine.jobs.queue import JobNotFound
    from app.ui.widgets import gallery_deleting
    from tests.ui.helpers import banner_button

    monkeypatch.setattr(gallery_deleting, "UNDO_MS", 400)  # the undo time, short for the test
    older = finished_job(queue, tmp_path / "older.png", "blue")
    newer = finished_job(queue, tmp_path / "newer.png", "red")
    gallery, view = window.gallery_model, window.gallery
    qtbot.waitUntil(lambda: len(gallery.paths()) == 2, timeout=TIMEOUT_MS)

    def click_thumbnail(job_id: int) -> None:
        row = next(i for i in range(gallery.rowCount())
                   if gallery.index(i).data(ROW_ROLE).id == job_id)  # fmt: skip
        where = view.visualRect(gallery.index(row)).center()
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=where)
        assert view.selected_ids() == [job_id]

    click_thumbnail(newer)
    qtbot.keyClick(view, Qt.Key.Key_Delete)
    assert gallery.paths() == [str(tmp_path / "older.png")]  # gone from the strip at once
    assert "job #" + str(newer) in window.delete_banner.label.text()
    qtbot.mouseClick(banner_button(qtbot, window.delete_banner, "Undo"), Qt.MouseButton.LeftButton)
    assert len(gallery.paths()) == 2 and not window.delete_banner.isVisible()
    qtbot.wait(600)  # past the undo time: nothing happens after an Undo
    assert queue.get(newer).output_path and (tmp_path / "newer.png").exists()

    click_thumbnail(newer)
    qtbot.keyClick(view, Qt.Key.Key_Delete)
    qtbot.waitUntil(lambda: not (tmp_path / "newer.png").exists(), timeout=TIMEOUT_MS)
    with pytest.raises(JobNotFound):
        queue.get(newer)
    qtbot.waitUntil(lambda: gallery.paths() == [str(tmp_path / "older.png")], timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: newer not in shown_ids(window), timeout=TIMEOUT_MS)
    assert queue.get(older).output_path
