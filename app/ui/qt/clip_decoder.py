"""A finished clip's frames as QImages, decoded off the GUI thread with PyAV, for the player.

PyAV rather than QtMultimedia: Easel depends on PySide6-Essentials, and QtMultimedia is in
PySide6-Addons (a far larger wheel, with its own FFmpeg and the platform's media backends
to go wrong); PyAV already writes the clips, bundles FFmpeg, and gives exact frames, which
a scrub to frame k and "Use frame as init image" need (a media player seeks to times).

The whole clip is decoded once, front to back, while the first frames already play: a
clip is seconds long. Memory stays bounded: frames larger than `MAX_CLIP_BYTES` allows in
all are scaled down as FFmpeg converts them (the image area shows them smaller anyway).
Frames come back through a plain queue drained by a GUI-thread timer, not a signal from
the decoding thread (see `dbthread.ThreadRunner` on why).
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QImage

log = logging.getLogger(__name__)

MAX_CLIP_BYTES = 256 * 1024 * 1024  # 81 frames at 832×480 take ~97 MB: those stay full size
BYTES_PER_PIXEL = 3  # RGB888
DRAIN_MS = 15  # frames reach the player within a frame at 60 fps
FALLBACK_FPS = 16.0  # a stream that names no rate (none of Easel's)


@dataclass(frozen=True)
class ClipInfo:
    frames: int  # as the file's header says (0: not recorded; known once all are decoded)
    fps: float
    width: int  # of the frames as decoded (scaled down if the clip is too large to hold)
    height: int


@dataclass(frozen=True)
class _Failed:
    message: str


_DONE = object()


def decoded_size(width: int, height: int, frames: int) -> tuple[int, int]:
    """The size to hold each frame at, so `frames` of them fit `MAX_CLIP_BYTES` (even sides)."""
    full = max(1, frames) * width * height * BYTES_PER_PIXEL
    if full <= MAX_CLIP_BYTES:
        return width, height
    scale = math.sqrt(MAX_CLIP_BYTES / full)
    return max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)


def _decode(path: str, out: queue.SimpleQueue[object], stop: threading.Event) -> None:
    """The decoding thread: the clip's info, then each frame, then `_DONE` (or `_Failed`)."""
    try:
        import av

        with av.open(os.fspath(path)) as container:
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate
            width, height = decoded_size(stream.width, stream.height, stream.frames)
            out.put(ClipInfo(stream.frames, float(rate) if rate else FALLBACK_FPS, width, height))
            for frame in container.decode(stream):
                if stop.is_set():
                    return
                rgb = frame.reformat(width=width, height=height, format="rgb24")
                plane = rgb.planes[0]
                image = QImage(bytes(plane), width, height, plane.line_size,
                               QImage.Format.Format_RGB888)  # fmt: skip
                out.put(image.copy())  # its own pixels: the buffer above is freed
    except Exception as error:  # a damaged or missing file: the player says so
        log.warning("cannot decode %s: %s", path, error)
        out.put(_Failed(str(error)))
        return
    out.put(_DONE)


class ClipDecoder(QObject):
    """Decodes one clip at a time; opening another (or `stop`) drops the one before."""

    opened = Signal(object)  # ClipInfo, before the first frame
    frame_decoded = Signal(int, QImage)  # its index and picture, in order
    finished = Signal(int)  # every frame decoded: how many there are
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._stop = threading.Event()
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._count = 0
        self._drain = QTimer(self)
        self._drain.setInterval(DRAIN_MS)
        self._drain.timeout.connect(self._deliver)

    def open(self, path: str) -> None:
        self.stop()
        self._stop, self._queue, self._count = threading.Event(), queue.SimpleQueue(), 0
        threading.Thread(
            target=_decode, args=(path, self._queue, self._stop), name="easel-clip", daemon=True
        ).start()
        self._drain.start()

    def stop(self) -> None:
        """Stop decoding (the thread ends at its next frame) and deliver nothing more."""
        self._stop.set()
        self._drain.stop()

    @property
    def decoding(self) -> bool:
        return self._drain.isActive()

    def _deliver(self) -> None:
        while self._drain.isActive():
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, QImage):
                self.frame_decoded.emit(self._count, item)
                self._count += 1
            elif isinstance(item, ClipInfo):
                self.opened.emit(item)
            else:
                self._drain.stop()
                if isinstance(item, _Failed):
                    self.failed.emit(item.message)
                else:
                    self.finished.emit(self._count)
