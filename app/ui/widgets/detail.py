"""Keeps the timeline and the image area on the selected job, as it changes."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QImage

from app.engine.jobs.states import JobStatus
from app.engine.outputs.video import VIDEO
from app.ui.presenters.actions import Action, applies
from app.ui.presenters.i18n import translate
from app.ui.presenters.rows import JobRow, NoteRow, TransitionRow
from app.ui.qt.dbthread import Runner
from app.ui.qt.thumbnails import load_still
from app.ui.viewmodels.jobs_viewmodel import JobsViewModel
from app.ui.widgets.image_panel import ImagePanel
from app.ui.widgets.timeline_panel import TimelinePanel

MAX_IMAGE_SIDE = 4096


class DetailController(QObject):
    problem = Signal(str)  # an image that will not open: the red banner, like every error

    def __init__(
        self,
        vm: JobsViewModel,
        image_runner: Runner,
        timeline: TimelinePanel,
        image: ImagePanel,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.vm = vm
        self._images = image_runner
        self.timeline = timeline
        self.image = image
        self.row: JobRow | None = None
        self._shown: tuple[object, ...] = ()  # what the image area shows: id, status, file
        vm.refreshed.connect(self._refreshed)
        vm.live.preview.connect(self._preview)

    def select(self, row: JobRow | None) -> None:
        changed = row is None or self.row is None or row.id != self.row.id
        self.row = row
        self.image.reuse.setEnabled(row is not None)
        self.image.reuse_seed.setEnabled(row is not None)
        for action, button in self.image.follow_ups.items():
            button.setEnabled(row is not None and applies(action, row))
        star = self.image.follow_ups[Action.STAR]
        star.setChecked(row is not None and row.starred)
        star.setText("★" if star.isChecked() else "☆")
        if row is None:
            self.timeline.show_job(None, ())
            self.image.show_nothing(self.tr("Select a job, or type a prompt and press Ctrl+Enter"))
            self._shown = ()
            return
        self._load_timeline(row.id)
        shown = (row.id, row.status, row.output_path)
        if changed or shown != self._shown:
            self._shown = shown
            self._show_image(row)

    def show_finished(self, row: JobRow) -> None:
        """Show a gallery image even when its job is not in the list's current page."""
        self.select(row)

    def _refreshed(self) -> None:
        if self.row is None:
            return
        fresh = self.vm.jobs.job(self.row.id)
        if fresh is not None and fresh != self.row:
            self.select(fresh)

    def _load_timeline(self, job_id: int) -> None:
        def show(loaded: tuple[Sequence[TransitionRow], Sequence[NoteRow]]) -> None:
            if self.row is not None and self.row.id == job_id:
                self.timeline.show_job(job_id, *loaded)

        self.vm.runner.run(lambda: self.vm.service.timeline_and_notes(job_id), show)

    def _show_image(self, row: JobRow) -> None:
        path = row.output_path
        if path:
            self._images.run(
                lambda: load_still(row.output_kind, path, MAX_IMAGE_SIDE),
                lambda image: self._loaded(row, path, image),
                lambda error: self._unreadable(
                    self.tr("Could not open the image: {error}").format(error=error)
                ),
            )
            return
        live = self.vm.live.get(row.id)
        last = self.vm.live.last_preview(row.id)
        if live is not None and live.preview is not None and row.status.is_running:
            self._preview(row.id, live.preview)
        elif last is not None and row.status is not JobStatus.PENDING:
            # Paused, cancelled, failed: show how far it got, with the reason as the caption.
            caption = _waiting_text(row).replace("\n", " ")
            self.image.show_image(last, self.tr("{caption} · last preview").format(caption=caption))
        else:
            self.image.show_nothing(_waiting_text(row))

    def _loaded(self, row: JobRow, path: str, image: QImage) -> None:
        if self.row is None or self.row.id != row.id:
            return
        if image.isNull():
            self._unreadable(
                self.tr("The image file is missing or unreadable: {path}").format(path=path)
            )
            return
        self.image.show_image(image, _caption(row), path)
        if plays(row):  # the first frame shows until the clip's frames are decoded
            self.image.play_clip(path)

    def _unreadable(self, problem: str) -> None:
        self.image.show_nothing(self.tr("No image to show"))
        self.problem.emit(problem)

    def _preview(self, job_id: int, image: QImage) -> None:
        if self.row is None or self.row.id != job_id or self.row.output_path:
            return
        live = self.vm.live.get(job_id)
        if live:
            caption = self.tr("Job {id} · preview · step {step}/{total}").format(
                id=job_id, step=live.step, total=live.total
            )
        else:
            caption = self.tr("Job {id} · preview").format(id=job_id)
        self.image.show_image(image, caption)


def plays(row: JobRow) -> bool:
    """The row's output is a clip, played in the image area (not a still picture)."""
    return row.output_kind is VIDEO


def _caption(row: JobRow) -> str:
    p = row.params
    if plays(row):
        clip = translate("DetailController", "{frames} frames at {fps} fps")
        return _still_caption(row) + " · " + clip.format(frames=p.frames, fps=p.fps)
    return _still_caption(row)


def _still_caption(row: JobRow) -> str:
    p = row.params
    return translate(
        "DetailController", "{prompt}  —  {size} · seed {seed} · {sampler} · {steps} steps"
    ).format(
        prompt=p.prompt, size=f"{p.width}×{p.height}", seed=p.seed, sampler=p.scheduler,
        steps=p.steps,
    )  # fmt: skip


def _waiting_text(row: JobRow) -> str:
    status = row.status_text
    step = f"{row.progress_step}/{row.progress_total}"
    values = {"id": row.id, "step": step, "status": status, "error": row.error}
    if row.cancel_pending:
        text = translate(
            "DetailController",
            "Job {id} is being cancelled.\nUndo (in the banner or the list) keeps it.",
        )
    elif row.error:
        text = translate("DetailController", "Job {id}: {status}\n{error}")
    elif row.status is JobStatus.PAUSED:
        text = translate(
            "DetailController", "Job {id} is paused at step {step}.\nResume continues from there."
        )
    elif row.status is JobStatus.PENDING:
        text = translate("DetailController", "Job {id} is waiting for a worker")
    elif row.status is JobStatus.BLOCKED:
        # The reason is the engine's sentence ("waiting for #12, which failed: ...")
        text = translate("DetailController", "Job {id} builds on another job's image:\n{why}")
        values["why"] = row.waiting
    elif row.status is JobStatus.CANCELLED:
        text = translate("DetailController", "Job {id} was cancelled at step {step}")
    else:
        text = translate("DetailController", "Job {id}: {status}")
    return text.format(**values)
