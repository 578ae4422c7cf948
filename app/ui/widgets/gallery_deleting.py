"""Delete from the gallery, with Undo: the images go from the strip at once, and the jobs
(images, history, checkpoints) are deleted through the engine's prune path only when the
undo time is over, or at quit.

Nothing is stored while the undo time runs, so a window that dies in it deletes nothing:
the images are back at the next launch. That errs the safe way; a delete, unlike a cancel,
cannot be taken back later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, QTimer

from app.ui.itemmodels.gallery_model import GalleryModel
from app.ui.presenters.queue_service import Outcome, QueueService
from app.ui.qt.dbthread import Runner
from app.ui.viewmodels.jobs_viewmodel import UNDO_MS
from app.ui.widgets.banner import Banner

log = logging.getLogger(__name__)


class GalleryDeleting(QObject):
    def __init__(
        self,
        model: GalleryModel,
        banner: Banner,
        runner: Runner,
        service: QueueService,
        after: Callable[[], None],
        show_error: Callable[[str], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._model, self._banner, self._runner, self._service = model, banner, runner, service
        self._after, self._show_error = after, show_error
        self._pending: tuple[int, ...] = ()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.finish)

    @property
    def pending(self) -> tuple[int, ...]:
        return self._pending

    def delete(self, job_ids: Sequence[int]) -> None:
        """Take the images out of the strip and offer Undo; an earlier offer ends first."""
        self.finish()
        self._pending = tuple(job_ids)
        if not self._pending:
            return
        self._model.hide(self._pending)
        self._banner.clear_actions()
        self._banner.add_action(self.tr("Undo"), self.undo)
        one = len(self._pending) == 1
        text = (
            self.tr("Deleting the image of job #{id} and its job · Undo within {s} s").format(
                id=self._pending[0], s=UNDO_MS // 1000
            )
            if one
            else self.tr("Deleting {n} images and their jobs · Undo within {s} s").format(
                n=len(self._pending), s=UNDO_MS // 1000
            )
        )
        self._banner.show_text(text, hide_after_ms=UNDO_MS)
        self._timer.start(UNDO_MS)

    def undo(self) -> None:
        self._timer.stop()
        self._pending = ()
        self._model.unhide()
        self._banner.hide()

    def finish(self) -> None:
        """The undo time is over: delete on the database thread."""
        ids = self._take()
        if ids:
            self._runner.run(lambda: self._service.delete_finished(ids), self._done,
                             self._failed)  # fmt: skip

    def finish_now(self) -> None:
        """At quit (the database thread stops): delete here."""
        ids = self._take()
        if ids:
            try:
                self._service.delete_finished(ids)
            except Exception:  # the jobs stay; nothing is half deleted (one transaction)
                log.exception("could not delete jobs %s", ids)

    def _take(self) -> tuple[int, ...]:
        ids, self._pending = self._pending, ()
        self._timer.stop()
        if ids:
            self._banner.hide()
        return ids

    def _done(self, outcome: Outcome) -> None:
        self._model.unhide()  # the deleted ones are gone from the next rows anyway
        for message in outcome.errors:
            self._show_error(message)
        self._after()

    def _failed(self, message: str) -> None:
        self._model.unhide()
        self._show_error(self.tr("Could not delete: {error}").format(error=message))
