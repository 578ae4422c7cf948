"""A finished clip plays in the image area: frames in turn at the clip's speed, and the
keys, clicks and position bar of a player. The clip is a real MP4, written by the
project's own writer (`app.engine.outputs.video`) and decoded by the player with PyAV."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QContextMenuEvent, QImage, QWheelEvent
from PySide6.QtWidgets import QApplication, QMenu, QWidget
from pytestqt.qtbot import QtBot

from app.engine.jobs.params import KIND_VIDEO, GenerationParams
from app.engine.outputs.video import write_video
from app.ui.qt.clip_decoder import MAX_CLIP_BYTES, decoded_size
from app.ui.widgets.image_panel import ImagePanel

pytestmark = pytest.mark.timeout(60)
FRAMES, FPS, SIDE = 9, 25, 32
# Colours far apart, so each frame is known by its middle pixel through H.264's rounding.
COLOURS = [((i * 97) % 256, (i * 53 + 80) % 256, (250 - i * 29) % 256) for i in range(FRAMES)]
TIMEOUT_MS = 5000


def write_clip(path: Path) -> Path:
    params = GenerationParams("a clip", width=SIDE, height=SIDE, kind=KIND_VIDEO)
    frames = [Image.new("RGB", (SIDE, SIDE), colour) for colour in COLOURS]
    write_video(frames, path, replace(params, frames=FRAMES, fps=FPS))
    return path


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_clip(tmp_path_factory.mktemp("clip") / "000001-1.mp4")


def frame_of(image: QImage | None) -> int:
    """Which of the clip's frames `image` is, by its colour."""
    assert image is not None
    pixel = image.pixelColor(image.width() // 2, image.height() // 2)
    seen = (pixel.red(), pixel.green(), pixel.blue())
    distance = [sum(abs(a - b) for a, b in zip(seen, c, strict=True)) for c in COLOURS]
    return distance.index(min(distance))


def wheel_at(widget: QWidget, notches: int) -> None:
    """The wheel turned over `widget`'s middle (up: positive), as the mouse sends it."""
    at = QPointF(widget.rect().center())
    event = QWheelEvent(at, widget.mapToGlobal(at), QPoint(), QPoint(0, 120 * notches),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                        Qt.ScrollPhase.NoScrollPhase, False)  # fmt: skip
    QApplication.sendEvent(widget, event)


@pytest.fixture
def panel(qtbot: QtBot, clip: Path) -> ImagePanel:
    panel = ImagePanel()
    qtbot.addWidget(panel)
    panel.resize(400, 400)
    panel.show()
    panel.show_image(QImage(str(clip.with_suffix(".png"))), "a clip", str(clip))
    panel.play_clip(str(clip))
    qtbot.waitUntil(lambda: len(panel.player.frames) == FRAMES, timeout=TIMEOUT_MS)
    return panel


def test_the_clip_plays_its_frames_in_turn_and_loops(qtbot: QtBot, panel: ImagePanel) -> None:
    player = panel.player
    assert player.isVisible() and player.playing and player.fps == FPS
    assert player.bar.maximum() == FRAMES - 1
    seen: list[int] = []
    player.frame_shown.connect(lambda image: seen.append(frame_of(image)))
    qtbot.waitUntil(lambda: len(seen) >= FRAMES + 3, timeout=TIMEOUT_MS)
    # In order, none skipped nor shown twice, and round again from the first (the loop is
    # on by default).
    assert all((b - a) % FRAMES == 1 for a, b in pairwise(seen))
    assert any((a, b) == (FRAMES - 1, 0) for a, b in pairwise(seen))
    assert frame_of(panel.canvas.image) == player.index


def test_without_the_loop_it_stops_on_the_last_frame_and_play_starts_again(
    qtbot: QtBot, panel: ImagePanel
) -> None:
    player = panel.player
    qtbot.mouseClick(player.loop, Qt.MouseButton.LeftButton)
    assert not player.loop.isChecked()
    qtbot.waitUntil(lambda: not player.playing, timeout=TIMEOUT_MS)
    assert player.index == FRAMES - 1 and frame_of(panel.canvas.image) == FRAMES - 1
    assert player.play_button.text() == "▶"
    qtbot.mouseClick(player.play_button, Qt.MouseButton.LeftButton)  # from the start
    assert player.playing and player.index == 0


def test_space_a_click_and_the_arrows_on_the_picture_as_in_a_player(
    qtbot: QtBot, panel: ImagePanel
) -> None:
    player, canvas = panel.player, panel.canvas
    qtbot.mouseClick(canvas, Qt.MouseButton.LeftButton)  # a click pauses (and takes the keys)
    assert not player.playing and canvas.hasFocus()
    qtbot.keyClick(canvas, Qt.Key.Key_Space)
    assert player.playing
    qtbot.keyClick(canvas, Qt.Key.Key_Space)
    assert not player.playing
    qtbot.keyClick(canvas, Qt.Key.Key_Home)
    assert player.index == 0 and frame_of(canvas.image) == 0
    for _ in range(3):
        qtbot.keyClick(canvas, Qt.Key.Key_Right)
    qtbot.keyClick(canvas, Qt.Key.Key_Left)
    assert player.index == 2 and frame_of(canvas.image) == 2 and not player.playing
    assert player.position.text() == "3/9 · 0.1/0.4 s"
    assert player.position.toolTip() == "Frame 3 of 9, 0.1 s of 0.4 s"
    qtbot.keyClick(canvas, Qt.Key.Key_End)
    assert player.index == FRAMES - 1 and player.bar.value() == FRAMES - 1
    wheel_at(canvas, notches=2)  # up: back two frames
    assert player.index == FRAMES - 3 and not player.playing
    wheel_at(canvas, notches=-1)
    assert player.index == FRAMES - 2
    qtbot.keyClick(canvas, Qt.Key.Key_K)
    assert player.playing
    qtbot.mouseClick(canvas, Qt.MouseButton.LeftButton)
    assert not player.playing


def test_a_click_on_the_position_bar_jumps_there_and_a_drag_scrubs(
    qtbot: QtBot, panel: ImagePanel
) -> None:
    player, bar = panel.player, panel.player.bar
    player.pause()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=QPoint(bar.width() - 2, bar.height() // 2))
    assert player.index == FRAMES - 1 and frame_of(panel.canvas.image) == FRAMES - 1
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=QPoint(1, bar.height() // 2))
    assert player.index == 0
    player.play()
    middle = QPoint(bar.width() // 2, bar.height() // 2)
    qtbot.mousePress(bar, Qt.MouseButton.LeftButton, pos=middle)  # held: paused on that frame
    assert not player.playing and player.index == FRAMES // 2
    qtbot.mouseRelease(bar, Qt.MouseButton.LeftButton, pos=middle)
    assert player.playing  # it was playing before the drag
    bar.setFocus()
    qtbot.keyClick(bar, Qt.Key.Key_Space)
    assert not player.playing


def test_showing_anything_else_stops_the_clip(qtbot: QtBot, panel: ImagePanel) -> None:
    panel.show_nothing("nothing")
    assert not panel.player.isVisible() and not panel.player.loaded
    assert not panel.player.timer.isActive() and panel.canvas.image is None
    assert not any(action.isVisible() for action in panel.clip_actions)
    assert panel.canvas.focusPolicy() == Qt.FocusPolicy.NoFocus


def test_a_file_that_is_no_clip_is_said_in_the_banner(qtbot: QtBot, tmp_path: Path) -> None:
    panel = ImagePanel()
    qtbot.addWidget(panel)
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a clip")
    with qtbot.waitSignal(panel.problem, timeout=TIMEOUT_MS) as said:
        panel.play_clip(str(broken))
    assert said.args is not None and str(said.args[0]).startswith("Cannot play the clip: ")
    assert not panel.player.playing


def test_a_long_clip_is_held_smaller_within_the_bound() -> None:
    assert decoded_size(832, 480, 81) == (832, 480)  # Wan 2.1's 81 frames at 480p: full size
    width, height = decoded_size(1280, 720, 241)
    assert 241 * width * height * 3 <= MAX_CLIP_BYTES and width % 2 == height % 2 == 0
    assert abs(width / height - 1280 / 720) < 0.01


def test_the_pictures_context_menu_offers_a_players_actions(
    qtbot: QtBot, panel: ImagePanel
) -> None:
    canvas = panel.canvas
    qtbot.mouseClick(canvas, Qt.MouseButton.LeftButton)  # paused
    # What a right click there delivers (QTest's clicks make no context-menu event).
    at = canvas.rect().center()
    reason = QContextMenuEvent.Reason.Mouse
    QApplication.sendEvent(canvas, QContextMenuEvent(reason, at, canvas.mapToGlobal(at)))
    qtbot.waitUntil(lambda: QApplication.activePopupWidget() is not None, timeout=TIMEOUT_MS)
    menu = QApplication.activePopupWidget()
    assert isinstance(menu, QMenu)
    texts = [action.text() for action in menu.actions() if action.text()]
    assert texts == ["Play", "Copy frame", "Save as GIF…", "Save as WebP…",
                     "Use frame as init image"]  # fmt: skip
    qtbot.keyClick(menu, Qt.Key.Key_Down)
    qtbot.keyClick(menu, Qt.Key.Key_Return)
    assert panel.player.playing
