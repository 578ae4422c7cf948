"""Looking at finished images from the main window: Enter on a job or a double click on the
shown image opens the viewer among the gallery's images, a click in the gallery shows that
job, and "Reuse settings" puts the shown job's settings in the form. A clip plays in the
image area instead of the viewer.

Words keep the "MainWindow" translation context they had inside the window.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import QWidget

from app.ui.itemmodels.gallery_model import GalleryModel
from app.ui.itemmodels.job_list_model import ROW_ROLE
from app.ui.presenters.i18n import translate
from app.ui.presenters.rows import JobRow
from app.ui.viewmodels.jobs_viewmodel import JobsViewModel
from app.ui.widgets.detail import DetailController, plays
from app.ui.widgets.image_viewer import ImageViewer
from app.ui.widgets.jobs_panel import JobsPanel
from app.ui.widgets.prompt_panel import PromptPanel


class ImageViewing:
    def __init__(
        self,
        parent: QWidget,
        vm: JobsViewModel,
        jobs: JobsPanel,
        detail: DetailController,
        gallery_model: GalleryModel,
        prompt: PromptPanel,
        show_note: Callable[[str], None],
        show_error: Callable[[str], None],
    ) -> None:
        self.parent = parent
        self.vm = vm
        self.jobs = jobs
        self.detail = detail
        self.gallery_model = gallery_model
        self.prompt = prompt
        self.show_note = show_note
        self.show_error = show_error
        self.viewer: ImageViewer | None = None

    def open_image(self, row: JobRow) -> None:
        """The finished image of `row` in the viewer, among the gallery's others; a clip
        plays in the image area instead, from its start (the viewer shows pictures)."""
        if not row.output_path:
            self.show_note(translate("MainWindow", "Job {id} has no image yet").format(id=row.id))
            return
        if plays(row):
            self.play_from_start(row)
            return
        paths = self.gallery_model.paths()
        if row.output_path not in paths:
            paths = [row.output_path]
        self.viewer = ImageViewer(paths, paths.index(row.output_path), self.parent)
        self.viewer.problem.connect(self.show_error)
        self.viewer.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.viewer.show()

    def play_from_start(self, row: JobRow) -> None:
        player = self.detail.image.player
        if self.detail.row is not None and self.detail.row.id == row.id and player.loaded:
            player.seek(0)
            player.play()
        else:  # shown (and played) once its first frame is read
            self.show_row(row)

    def view_shown_image(self) -> None:
        """A double click on the image area: the shown job's image, if it has one (a
        clip's double click is two clicks: pause and play)."""
        row = self.detail.row
        if row is not None and self.detail.image.path is not None and not plays(row):
            self.open_image(row)

    def reuse_settings(self) -> None:
        if (row := self.detail.row) is not None:
            self.prompt.set_params(row.params)
            note = translate("MainWindow", "Settings of job {id} are in the form")
            self.show_note(note.format(id=row.id))

    def gallery_clicked(self, index: QModelIndex) -> None:
        """The job in the list when the list has it, else shown from the gallery's row (a
        clip starts playing once shown)."""
        row = index.data(ROW_ROLE)
        if row is not None:
            self.show_row(row)

    def gallery_opened(self, index: QModelIndex) -> None:
        """A double click or Enter in the gallery: the viewer, or a clip from its start."""
        row = index.data(ROW_ROLE)
        if row is not None:
            self.open_image(row)

    def show_row(self, row: JobRow) -> None:
        if self.vm.jobs.row_of(row.id) is not None:
            self.jobs.select_jobs([row.id])
        else:
            self.detail.show_finished(row)
