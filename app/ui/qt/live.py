"""Progress and previews that workers report between database writes (WorkerMessages)."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QImage

from app.engine.workers.messages import MessageKind, WorkerMessage
from app.ui.presenters.rows import eta_s

KEPT_PREVIEWS = 64  # last previews of stopped jobs (paused, cancelled) kept for the viewer


@dataclass
class Live:
    step: int
    total: int
    elapsed_s: float
    at: float
    preview: QImage | None = None

    def eta_s(self) -> float | None:
        return eta_s(self.step, self.total, self.elapsed_s + (time.monotonic() - self.at))


class LiveProgress(QObject):
    """Latest progress per job; emits `changed(job_id)` and asks for a refresh on settles."""

    changed = Signal(int)
    preview = Signal(int, QImage)
    settled = Signal(int)  # a worker started or finished a job: the store has news

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._live: dict[int, Live] = {}
        # Outlives `forget`: a paused or cancelled job still shows where it got to.
        self._last_previews: OrderedDict[int, QImage] = OrderedDict()

    def get(self, job_id: int) -> Live | None:
        return self._live.get(job_id)

    def last_preview(self, job_id: int) -> QImage | None:
        return self._last_previews.get(job_id)

    def forget(self, job_id: int) -> None:
        self._live.pop(job_id, None)

    def handle(self, message: WorkerMessage) -> None:
        if message.job_id is None:
            return
        if message.kind is MessageKind.PROGRESS:
            self._progress(message.job_id, message)
        elif message.kind in (MessageKind.STARTED, MessageKind.FINISHED):
            self.settled.emit(message.job_id)

    def _progress(self, job_id: int, message: WorkerMessage) -> None:
        old = self._live.get(job_id)
        image = _decode(message.preview_png) if message.preview_png else None
        preview = image if image is not None else (old.preview if old else None)
        self._live[job_id] = Live(
            message.step, message.total, message.elapsed_s, time.monotonic(), preview
        )
        self.changed.emit(job_id)
        if image is not None:
            self._last_previews[job_id] = image
            self._last_previews.move_to_end(job_id)
            while len(self._last_previews) > KEPT_PREVIEWS:
                self._last_previews.popitem(last=False)
            self.preview.emit(job_id, image)


def _decode(data: bytes) -> QImage | None:
    image = QImage()
    return image if image.loadFromData(data) else None
