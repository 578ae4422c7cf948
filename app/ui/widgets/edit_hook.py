"""The window's way into "Edit with words…": from a result (the image's and the job list's
follow-ups) the edit is a child of its job; from a file or a pasted picture (the Image
menu, beside the mask editor's entries) the picture is stored with the job. The job is
built and queued off the GUI thread by the engine function the command line's `edit`
uses; its refusal, or its finished image, comes back to the dialog.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QGuiApplication, QImage, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QWidget

from app.ui.presenters.i18n import translate
from app.ui.presenters.model_choices import ModelChoice
from app.ui.presenters.queue_service import Outcome, QueueService
from app.ui.presenters.rows import JobRow
from app.ui.presenters.word_edits import EditModel, WordEdit
from app.ui.viewmodels.jobs_viewmodel import JobsViewModel
from app.ui.widgets.mask_hook import IMAGE_FILTER, png_of

if TYPE_CHECKING:
    from app.ui.widgets.edit_dialog import EditDialog

Source = int | bytes  # the job whose picture is edited, or the picture's bytes


class WordEdits:
    """The edit dialogs of one main window, and the jobs they are waiting for."""

    def __init__(
        self,
        parent: QWidget,
        vm: JobsViewModel,
        queue: QueueService,
        models: Callable[[], list[ModelChoice]],
        show_error: Callable[[str], None],
    ) -> None:
        self.parent = parent
        self.vm = vm
        self.queue = queue
        self.models = models  # the picker's scan: which installed models edit
        self.show_error = show_error
        self.dialogs: list[EditDialog] = []
        self.waiting: dict[int, EditDialog] = {}  # submitted edit -> the dialog to show it in
        self.unfinished: dict[int, EditDialog] = {}  # edited job, not done yet -> its dialog
        vm.settled.connect(self._settled)

    def open_row(self, row: JobRow) -> EditDialog:
        """An edit of `row`'s picture (shown once it exists), as a child of the job."""
        caption = translate("EditDialog", "Job {id}: {prompt}").format(id=row.id, prompt=row.prompt)
        picture = QImage(row.output_path or "")
        dialog = self._open(picture, caption, row.id, row.params.model)
        if picture.isNull():
            self.unfinished[row.id] = dialog
        return dialog

    def open_file(self, path: Path | None = None) -> EditDialog | None:
        """An edit of a picture file (asked for when not given)."""
        if path is None:
            title = translate("EditDialog", "Edit a picture with words")
            name, _ = QFileDialog.getOpenFileName(self.parent, title, "", IMAGE_FILTER)
            if not name:
                return None
            path = Path(name)
        image = QImage(str(path))
        if image.isNull():
            problem = translate("EditDialog", "{path} is not an image that can be read")
            self.show_error(problem.format(path=path))
            return None
        return self._open(image, path.name, path.read_bytes(), "")

    def open_pasted(self) -> EditDialog | None:
        image = QGuiApplication.clipboard().image()
        if image.isNull():
            self.show_error(translate("EditDialog", "The clipboard holds no picture"))
            return None
        return self._open(image, translate("EditDialog", "A pasted picture"), png_of(image), "")

    def add_to(self, menu: QMenu, current_row: Callable[[], JobRow | None]) -> None:
        """The Image menu's entries: the selected result, else a file; a pasted picture."""

        def selected() -> None:
            row = current_row()
            if row is not None and row.has_picture:
                self.open_row(row)
            else:
                self.open_file()

        menu.addSeparator()
        for text, slot, keys in (
            (translate("EditDialog", "Edit with &words…"), selected, "Ctrl+Alt+E"),
            (translate("EditDialog", "Edit a pasted picture with words"), self.open_pasted, ""),
        ):
            action = QAction(text, menu)
            if keys:
                action.setShortcut(QKeySequence(keys))
            action.triggered.connect(slot)
            menu.addAction(action)

    def _open(self, image: QImage, caption: str, source: Source, preferred: str) -> EditDialog:
        # Loaded when first opened, not at window start-up.
        from app.engine.generation.request_checks import editing_families
        from app.ui.widgets.edit_dialog import EditDialog

        editors = [
            EditModel(choice.name, choice.edit_images, choice.edit_steps, choice.edit_cfg)
            for choice in self.models()
            if choice.edits and choice.supported
        ]
        dialog = EditDialog(image, caption, editors, preferred, editing_families(), self.parent)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.edit_requested.connect(lambda edit: self._submit(dialog, source, edit))
        dialog.file_dropped.connect(self.open_file)
        dialog.destroyed.connect(lambda: self._forget(dialog))
        self.dialogs.append(dialog)
        dialog.show()
        return dialog

    def _submit(self, dialog: EditDialog, source: Source, edit: WordEdit) -> None:
        def done(outcome: Outcome) -> None:
            if dialog not in self.dialogs:  # closed meanwhile: the banner says it
                for message in outcome.errors:
                    self.show_error(message)
            elif outcome.errors:
                dialog.refused(outcome.errors[0])
            else:
                self.waiting[outcome.job_ids[0]] = dialog
                dialog.queued(outcome.job_ids[0])
            self.vm.refresh()

        self.vm.runner.run(lambda: self.queue.edit(source, edit), done, self.show_error)

    def _settled(self, row: JobRow) -> None:
        edited = self.unfinished.pop(row.id, None)
        if edited is not None and row.output_path:
            edited.set_picture(QImage(row.output_path))
        dialog = self.waiting.pop(row.id, None)
        if dialog is not None and row.output_path:
            dialog.set_result(QImage(row.output_path))

    def _forget(self, dialog: object) -> None:
        self.dialogs = [d for d in self.dialogs if d is not dialog]
        self.waiting = {k: d for k, d in self.waiting.items() if d is not dialog}
        self.unfinished = {k: d for k, d in self.unfinished.items() if d is not dialog}
