"""Edit with words: a small window with the picture edited (a thumbnail), the instruction
("make it night") and the model that edits it; "Edit" asks for the job, and the finished
edit is shown in place of the picture with the mask editor's before/after toggle (B).

It submits nothing itself: it emits what was asked for and the window's hook
(`edit_hook`) queues the job, then hands back the refusal or the result.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage, QKeySequence, QPixmap, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

THUMBNAIL_PX = 320  # the picture's longer side in the window


class EditDialog(QDialog):
    edit_requested = Signal(str, str)  # (instruction, model)
    file_dropped = Signal(object)  # a Path dropped on the dialog: edit it in another one

    def __init__(
        self,
        picture: QImage,
        caption: str,
        models: list[str],
        preferred: str = "",
        editing_families: str = "Flux.1 Kontext",
        parent: QWidget | None = None,
    ) -> None:
        """`models`: the installed models that edit (none: the dialog says how to get one);
        `preferred`: the one picked first when it is among them (the edited job's);
        `editing_families`: the families that edit, as the engine declares them."""
        super().__init__(parent)
        self.editing_families = editing_families
        self.setWindowTitle(self.tr("Edit with words"))
        self.picture = picture
        self.result_image = QImage()
        self.thumbnail = QLabel()
        self.thumbnail.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.thumbnail.setMinimumSize(THUMBNAIL_PX // 2, THUMBNAIL_PX // 2)
        self.caption = QLabel(caption)
        self.caption.setObjectName("caption")
        self.instruction = QLineEdit()
        self.instruction.setPlaceholderText(self.tr("What to change, e.g. “make it night”"))
        self.model = QComboBox()
        self.model.addItems(models)
        if preferred in models:
            self.model.setCurrentText(preferred)
        self.status_line = QLabel()
        self.status_line.setObjectName("caption")
        self.status_line.setWordWrap(True)
        self._layout(self._buttons())
        self._show(picture)
        QShortcut(QKeySequence("B"), self, self._toggle_if_ready)
        self.instruction.textChanged.connect(self._update_buttons)
        if not models:
            self.model.setEnabled(False)
            self.status_line.setText(self.no_model_sentence())
        self._update_buttons()
        self.setAcceptDrops(True)
        self.instruction.setFocus()

    def _buttons(self) -> QHBoxLayout:
        self.before_after = QPushButton(self.tr("After"))
        self.before_after.setCheckable(True)
        self.before_after.setToolTip("B")
        self.before_after.toggled.connect(self._show_after)
        self.edit = QPushButton(self.tr("Edit"))
        self.edit.setDefault(True)
        self.edit.clicked.connect(self._edit)
        close = QPushButton(self.tr("Close"))
        close.clicked.connect(self.reject)
        row = QHBoxLayout()
        row.addWidget(self.before_after)
        row.addStretch(1)
        row.addWidget(close)
        row.addWidget(self.edit)
        return row

    def _layout(self, buttons: QHBoxLayout) -> None:
        form = QFormLayout()
        form.addRow(self.tr("Instruction"), self.instruction)
        form.addRow(self.tr("Model"), self.model)
        layout = QVBoxLayout(self)
        layout.addWidget(self.thumbnail, 1)
        layout.addWidget(self.caption)
        layout.addLayout(form)
        layout.addWidget(self.status_line)
        layout.addLayout(buttons)

    def no_model_sentence(self) -> str:
        return self.tr(
            "No model that edits is installed: put a {families} model folder (a diffusers "
            "folder from Hugging Face, such as FLUX.1-Kontext-dev) in the models folder."
        ).format(families=self.editing_families)

    # --- what the controls do -----------------------------------------------------------------

    def _update_buttons(self) -> None:
        ready = bool(self.instruction.text().strip()) and self.model.count() > 0
        self.edit.setEnabled(ready)
        self.before_after.setEnabled(not self.result_image.isNull())

    def _edit(self) -> None:
        if not self.edit.isEnabled():
            return
        self.status_line.setText(self.tr("Queuing the edit…"))
        self.edit_requested.emit(self.instruction.text().strip(), self.model.currentText())

    def queued(self, job_id: int) -> None:
        self.status_line.setText(self.tr("Edit queued as job {id}").format(id=job_id))

    def refused(self, sentence: str) -> None:
        self.status_line.setText(sentence)

    def set_picture(self, image: QImage) -> None:
        """The edited job's picture, once that job has finished."""
        self.picture = image
        self._show_after(self.before_after.isChecked())

    def set_result(self, image: QImage) -> None:
        """The finished edit: shown at once ("after"); the toggle goes back and forth."""
        self.result_image = image
        self._update_buttons()
        self.status_line.setText(self.tr("The edit is ready"))
        self.before_after.setChecked(True)
        self._show_after(True)

    def _toggle_if_ready(self) -> None:
        if self.before_after.isEnabled():
            self.before_after.toggle()

    def _show_after(self, after: bool) -> None:
        ready = after and not self.result_image.isNull()
        self._show(self.result_image if ready else self.picture)
        self.before_after.setText(self.tr("Before") if after else self.tr("After"))

    def _show(self, image: QImage) -> None:
        if image.isNull():
            self.thumbnail.setText(self.tr("The picture appears once its job has finished"))
            return
        scaled = image.scaled(
            THUMBNAIL_PX, THUMBNAIL_PX, Qt.AspectRatioMode.KeepAspectRatio,
            Qt.TransformationMode.SmoothTransformation,
        )  # fmt: skip
        self.thumbnail.setPixmap(QPixmap.fromImage(scaled))

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.file_dropped.emit(Path(url.toLocalFile()))

    def shown_image(self) -> str:
        """Which picture the thumbnail shows: "before" or "after" (tests, screenshots)."""
        after = self.before_after.isChecked() and not self.result_image.isNull()
        return "after" if after else "before"
