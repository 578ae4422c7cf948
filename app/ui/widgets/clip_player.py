"""The player of a finished clip, under the image area: play/pause, a position bar (frame k
of N, and the time), loop. The frames it shows go to the image area's canvas.

Keys (`presenters.shortcuts`, listed in Help), where the picture or the bar has the focus:
Space or K play and pause; Left and Right (or , and .) step one frame, pausing; Home and
End go to the first and last frame.
A click on the picture plays or pauses, its wheel steps frames; a click on the bar jumps
there, and dragging it scrubs (playing again on release if it was playing).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QImage, QKeyEvent, QKeySequence, QMouseEvent, QWheelEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSlider, QToolButton, QWidget

from app.ui.presenters import shortcuts
from app.ui.qt.clip_decoder import ClipDecoder, ClipInfo

PLAY, PAUSE = "▶", "❚❚"


class PositionBar(QSlider):
    """A click on the bar jumps to that frame, as a player's position bar does (a plain
    slider moves a page towards the click)."""

    def __init__(self) -> None:
        super().__init__(Qt.Orientation.Horizontal)
        self.setPageStep(1)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.maximum() > self.minimum():
            span = max(1, self.width() - 1)
            at = round(event.position().x() / span * (self.maximum() - self.minimum()))
            self.setValue(self.minimum() + max(0, min(at, self.maximum() - self.minimum())))
        super().mousePressEvent(event)


class ClipPlayer(QWidget):
    frame_shown = Signal(QImage)  # the frame to show now (the canvas takes it)
    problem = Signal(str)  # the clip cannot be played: the red banner

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("clipPlayer")
        self.path: str | None = None  # the clip open
        self.frames: list[QImage] = []
        self.total = 0  # the clip's frames (those decoded so far, until the header or the end says)
        self.fps = 16.0
        self.index = 0  # the frame shown
        self.playing = False
        self._resume_after_drag = False
        self.decoder = ClipDecoder(self)
        self.decoder.opened.connect(self._opened)
        self.decoder.frame_decoded.connect(self._decoded)
        self.decoder.finished.connect(self._all_decoded)
        self.decoder.failed.connect(self._failed)
        self.timer = QTimer(self)
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.timeout.connect(self._tick)
        self._build()

    def _build(self) -> None:
        self.play_button = QToolButton()
        self.play_button.setObjectName("playPause")
        self.play_button.setMinimumWidth(36)
        self.play_button.clicked.connect(self.toggle)
        self.bar = PositionBar()
        self.bar.setObjectName("clipPosition")
        self.bar.setMinimumWidth(120)
        self.bar.valueChanged.connect(self._bar_moved)
        self.bar.sliderPressed.connect(self._drag_started)
        self.bar.sliderReleased.connect(self._drag_ended)
        self.bar.installEventFilter(self)
        self.position = QLabel()
        self.position.setObjectName("clipTime")
        self.loop = QToolButton()
        self.loop.setText(self.tr("Loop"))
        self.loop.setCheckable(True)
        self.loop.setChecked(True)
        self.loop.setToolTip(self.tr("Start again at the end"))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.play_button)
        layout.addWidget(self.bar, 1)
        layout.addWidget(self.position)
        layout.addWidget(self.loop)
        self._show_state()

    # --- opening ------------------------------------------------------------------------------

    def open(self, path: str) -> None:
        """Decode the clip at `path` and play it from its first frame as frames arrive."""
        self.close_clip()
        self.path, self.playing = path, True
        self.decoder.open(path)
        self.show()
        self._show_state()

    def close_clip(self) -> None:
        self.decoder.stop()
        self.timer.stop()
        self.frames, self.total, self.index, self.playing = [], 0, 0, False
        self.path = None
        self.hide()

    @property
    def loaded(self) -> bool:
        """A clip is open (playing, paused or still being decoded)."""
        return self.path is not None

    def _opened(self, info: ClipInfo) -> None:
        self.fps = info.fps
        self.total = info.frames
        self.timer.setInterval(max(1, round(1000 / self.fps)))

    def _decoded(self, index: int, image: QImage) -> None:
        self.frames.append(image)
        self.total = max(self.total, len(self.frames))
        if index == 0:
            self._show(0)
            if self.playing:
                self.timer.start()
        self._show_state()

    def _all_decoded(self, count: int) -> None:
        self.total = count  # the header may have been wrong or silent
        self.index = min(self.index, max(0, count - 1))
        self._show_state()

    def _failed(self, message: str) -> None:
        self.timer.stop()
        self.playing = False
        self._show_state()
        self.problem.emit(self.tr("Cannot play the clip: {error}").format(error=message))

    # --- playing ------------------------------------------------------------------------------

    def toggle(self) -> None:
        self.pause() if self.playing else self.play()

    def play(self) -> None:
        if not self.frames:
            self.playing = True  # starts with the first decoded frame
        else:
            if self.index >= self.total - 1 and not self.decoder.decoding:
                self._show(0)  # at the end: from the start, as players do
            self.playing = True
            self.timer.start()
        self._show_state()

    def pause(self) -> None:
        self.playing = False
        self.timer.stop()
        self._show_state()

    def seek(self, index: int) -> None:
        """Show frame `index` (within those decoded so far)."""
        if self.frames:
            self._show(max(0, min(index, len(self.frames) - 1)))

    def step(self, by: int) -> None:
        """One frame on or back, paused (as a player's frame step)."""
        self.pause()
        self.seek(self.index + by)

    def _tick(self) -> None:
        following = self.index + 1
        if following >= self.total and not self.decoder.decoding:
            if not self.loop.isChecked():
                self.pause()
                return
            following = 0
        if following < len(self.frames):  # else still being decoded: wait for it
            self._show(following)

    def _show(self, index: int) -> None:
        self.index = index
        self.frame_shown.emit(self.frames[index])
        self._show_state()

    # --- the bar and keys ---------------------------------------------------------------------

    def _bar_moved(self, value: int) -> None:
        if value != self.index:
            self.seek(value)

    def _drag_started(self) -> None:
        self._resume_after_drag = self.playing
        self.pause()

    def _drag_ended(self) -> None:
        if self._resume_after_drag:
            self.play()

    def handle_key(self, event: QKeyEvent) -> bool:
        """A player's key on the picture or the bar: done (True), or not a player's key."""
        pressed = QKeySequence(event.keyCombination())
        for shortcut, act in (
            (shortcuts.PLAY_CLIP, self.toggle),
            (shortcuts.FRAME_BACK, lambda: self.step(-1)),
            (shortcuts.FRAME_ON, lambda: self.step(1)),
            (shortcuts.CLIP_START, lambda: self.step(-self.index)),
            (shortcuts.CLIP_END, lambda: self.step(len(self.frames))),
        ):
            if any(pressed == QKeySequence(keys) for keys in shortcut.keys):
                act()
                return True
        return False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            return self.handle_key(event)
        if watched is not self.bar and isinstance(event, QWheelEvent) and self.loaded:
            notches = event.angleDelta().y() // 120  # the bar's own wheel moves it already
            if notches:
                self.step(-notches)  # down: on, as a list scrolls on
            return True
        return super().eventFilter(watched, event)

    def _show_state(self) -> None:
        playing = self.playing
        self.play_button.setText(PAUSE if playing else PLAY)
        tip = self.tr("Pause (Space)") if playing else self.tr("Play (Space)")
        self.play_button.setToolTip(tip)
        self.bar.blockSignals(True)  # following the clip is no move of the user's
        self.bar.setRange(0, max(0, self.total - 1))
        self.bar.setValue(self.index)
        self.bar.blockSignals(False)
        at, length = self.index / self.fps, self.total / self.fps
        k, n = self.index + 1, max(1, self.total)
        # Short beside the bar, which needs the room in a narrow image column; in words
        # in its tooltip.
        self.position.setText(self.tr("{k}/{n} · {at:.1f}/{length:.1f} s").format(
            k=k, n=n, at=at, length=length))  # fmt: skip
        self.position.setToolTip(self.tr("Frame {k} of {n}, {at:.1f} s of {length:.1f} s").format(
            k=k, n=n, at=at, length=length))  # fmt: skip
