"""Actions on finished jobs, from the job list or the shown image: star, upscale,
variations, edit with words, "use as init image" and "show in folder", plus init images
dropped or pasted on the form. Store reads run on the window's database thread.

Words keep the "MainWindow" translation context they had inside the window.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from app.ui.presenters.actions import Action
from app.ui.presenters.i18n import translate
from app.ui.presenters.queue_service import QueueService
from app.ui.presenters.rows import JobRow
from app.ui.qt.dbthread import Runner
from app.ui.qt.file_manager import FileManager
from app.ui.viewmodels.jobs_viewmodel import JobsViewModel
from app.ui.widgets.edit_hook import WordEdits
from app.ui.widgets.prompt_panel import PromptPanel
from app.ui.widgets.variations_dialog import VariationsDialog


class FollowUps:
    def __init__(
        self,
        parent: QWidget,
        vm: JobsViewModel,
        queue: QueueService,
        prompt: PromptPanel,
        file_manager: FileManager,
        show_error: Callable[[str], None],
    ) -> None:
        self.parent = parent
        self.vm = vm
        self.queue = queue
        self.prompt = prompt
        self.file_manager = file_manager
        self.show_error = show_error
        self.variations_dialog: VariationsDialog | None = None
        self.word_edits = WordEdits(parent, vm, queue, prompt.model_choices, show_error)

    @property
    def runner(self) -> Runner:
        return self.vm.runner

    def run(self, action: Action, rows: list[JobRow]) -> None:
        """`action` on jobs of the list or the shown one."""
        if not rows:
            return
        if action is Action.STAR:
            self.vm.star([row.id for row in rows], on=not all(row.starred for row in rows))
        elif action is Action.UPSCALE:
            self.vm.upscale([row.id for row in rows])
        elif action is Action.VARY:
            self.ask_variations(rows[0])
        elif action is Action.EDIT:
            self.word_edits.open_row(rows[0])
        elif action is Action.USE_AS_INIT:
            self.use_as_init(rows[0].id)
        elif action is Action.SHOW_IN_FOLDER and rows[0].output_path:
            self.file_manager.show_in_folder(rows[0].output_path)

    def ask_variations(self, row: JobRow) -> None:
        """How many variations and how different: a small window-modal question (Enter
        takes the defaults)."""
        dialog = VariationsDialog(row.id, self.parent)
        dialog.chosen.connect(lambda count, strength: self.vm.variations(row.id, count, strength))
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.variations_dialog = dialog
        dialog.open()

    def use_as_init(self, job_id: int) -> None:
        """Fill the form from a finished job, starting from its image (read off the GUI thread)."""
        self.runner.run(
            lambda: self.queue.init_from_job(job_id), self.prompt.set_init, self.show_error
        )

    def prepare_init(self, source: object, name: str) -> None:
        """A dropped or pasted image as init image; one that cannot be used: the red banner."""
        assert isinstance(source, bytes | Path)
        problem = translate("MainWindow", "Cannot start from {name}: {error}")
        self.runner.run(
            lambda: self.queue.prepare_init(source, name),
            self.prompt.set_init,
            lambda message: self.show_error(problem.format(name=name, error=message)),
        )
