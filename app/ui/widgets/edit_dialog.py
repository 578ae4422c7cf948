"""Edit with words: a small window with the picture edited (a thumbnail), the instruction
("make it night"), the model that edits it and the steps and cfg it runs with (the model's
own for an edit, shown); "Edit" asks for the job, and the finished edit is shown in place
of the picture with the mask editor's before/after toggle (B).

For a model that reads several input images (Qwen-Image-Edit Plus) the input images are a
row of thumbnails, the picture edited first: more are added from a file ("Add image…"), the
clipboard ("Paste image", or Ctrl+V on the row) or a drop on the dialog, and a selected one
is removed ("Remove", or Delete on the row).

It submits nothing itself: it emits what was asked for and the window's hook
(`edit_hook`) queues the job, then hands back the refusal or the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtGui import (
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QIcon,
    QImage,
    QKeyEvent,
    QKeySequence,
    QPixmap,
    QShortcut,
)
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.ui.presenters.word_edits import EditModel, WordEdit
from app.ui.widgets.mask_hook import IMAGE_FILTER, png_of

THUMBNAIL_PX = 320  # the picture's longer side in the window
INPUT_PX = 64  # an input image's thumbnail in the row
MAX_STEPS, MAX_CFG = 150, 30.0  # the engine's bounds (jobs.params)


class EditDialog(QDialog):
    edit_requested = Signal(object)  # a WordEdit
    file_dropped = Signal(object)  # a Path dropped on the dialog: edit it in another one

    def __init__(
        self,
        picture: QImage,
        caption: str,
        models: Sequence[str | EditModel],
        preferred: str = "",
        editing_families: str = "Flux.1 Kontext",
        parent: QWidget | None = None,
    ) -> None:
        """`models`: the installed models that edit (none: the dialog says how to get one;
        a bare name: one input image, Kontext's settings); `preferred`: the one picked
        first when it is among them (the edited job's); `editing_families`: the families
        that edit, as the engine declares them."""
        super().__init__(parent)
        self.editing_families = editing_families
        self.models = {
            m.name: m for m in (EditModel(m) if isinstance(m, str) else m for m in models)
        }
        self.more_images: list[bytes] = []  # further input images (PNG), in order
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
        self.model.addItems(list(self.models))
        if preferred in self.models:
            self.model.setCurrentText(preferred)
        self.steps = QSpinBox()
        self.steps.setRange(1, MAX_STEPS)
        self.cfg = QDoubleSpinBox()
        self.cfg.setRange(0.0, MAX_CFG)
        self.cfg.setSingleStep(0.5)
        self.cfg.setDecimals(1)
        self.status_line = QLabel()
        self.status_line.setObjectName("caption")
        self.status_line.setWordWrap(True)
        self.inputs_row = self._inputs_row()
        self._layout(self._buttons())
        self._show(picture)
        QShortcut(QKeySequence("B"), self, self._toggle_if_ready)
        self.instruction.textChanged.connect(self._update_buttons)
        self.model.currentTextChanged.connect(self._model_changed)
        self._model_changed(self.model.currentText())
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

    def _inputs_row(self) -> QWidget:
        """The input images as thumbnails (the picture edited first), with Add, Paste and
        Remove: shown for a model that reads several."""
        self.inputs = QListWidget()
        self.inputs.setViewMode(QListView.ViewMode.IconMode)
        self.inputs.setFlow(QListView.Flow.LeftToRight)
        self.inputs.setWrapping(False)
        self.inputs.setIconSize(QSize(INPUT_PX, INPUT_PX))
        self.inputs.setFixedHeight(INPUT_PX + 40)
        self.inputs.currentRowChanged.connect(lambda _row: self._update_inputs())
        self.add_image = QPushButton(self.tr("Add image…"))
        self.add_image.clicked.connect(self._add_from_file)
        self.paste_image = QPushButton(self.tr("Paste image"))
        self.paste_image.clicked.connect(self._add_pasted)
        self.remove_image = QPushButton(self.tr("Remove"))
        self.remove_image.clicked.connect(self._remove_selected)
        self.inputs.installEventFilter(self)  # Ctrl+V adds the clipboard's, Delete removes
        self.inputs_count = QLabel()
        self.inputs_count.setObjectName("caption")
        buttons = QHBoxLayout()
        for widget in (self.add_image, self.paste_image, self.remove_image):
            buttons.addWidget(widget)
        buttons.addStretch(1)
        buttons.addWidget(self.inputs_count)
        row = QWidget()
        layout = QVBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel(self.tr("Input images, in order (the first is edited)")))
        layout.addWidget(self.inputs)
        layout.addLayout(buttons)
        return row

    def _layout(self, buttons: QHBoxLayout) -> None:
        form = QFormLayout()
        form.addRow(self.tr("Instruction"), self.instruction)
        form.addRow(self.tr("Model"), self.model)
        form.addRow(self.tr("Steps"), self.steps)
        form.addRow(self.tr("CFG"), self.cfg)
        layout = QVBoxLayout(self)
        layout.addWidget(self.thumbnail, 1)
        layout.addWidget(self.caption)
        layout.addWidget(self.inputs_row)
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
        chosen = self.chosen_model()
        more = tuple(self.more_images) if chosen.reads_several else ()
        self.edit_requested.emit(
            WordEdit(self.instruction.text().strip(), chosen.name, self.steps.value(),
                     self.cfg.value(), more)
        )  # fmt: skip

    # --- the model and its input images --------------------------------------------------------

    def chosen_model(self) -> EditModel:
        return self.models.get(self.model.currentText(), EditModel(self.model.currentText()))

    def _model_changed(self, _name: str) -> None:
        """Its own steps and cfg for an edit, shown; its input images row where it reads
        several (the further images are kept, for a switch back)."""
        chosen = self.chosen_model()
        self.steps.setValue(chosen.steps)
        self.cfg.setValue(chosen.cfg)
        self.inputs_row.setVisible(chosen.reads_several)
        self._update_inputs()

    def add_input(self, png: bytes) -> bool:
        """`png` as the next input image, where the model reads one more."""
        chosen = self.chosen_model()
        if not chosen.reads_several or 1 + len(self.more_images) >= chosen.images:
            return False
        self.more_images.append(png)
        self._update_inputs()
        return True

    def _add_from_file(self) -> None:
        title = self.tr("Add an input image")
        name, _ = QFileDialog.getOpenFileName(self, title, "", IMAGE_FILTER)
        if name:
            self._add_file(Path(name))

    def _add_file(self, path: Path) -> None:
        image = QImage(str(path))
        if image.isNull():
            self.status_line.setText(
                self.tr("{path} is not an image that can be read").format(path=path)
            )
            return
        self.add_input(png_of(image))

    def _add_pasted(self) -> None:
        image = QGuiApplication.clipboard().image()
        if image.isNull():
            self.status_line.setText(self.tr("The clipboard holds no picture"))
            return
        self.add_input(png_of(image))

    def _remove_selected(self) -> None:
        row = self.inputs.currentRow()
        if row >= 1:  # the picture edited stays: it is the edit's own
            del self.more_images[row - 1]
            self._update_inputs()

    def _update_inputs(self) -> None:
        """The thumbnails again (the picture edited first), the count and the buttons."""
        selected = self.inputs.currentRow()
        self.inputs.blockSignals(True)
        self.inputs.clear()
        pictures = [self.picture, *(QImage.fromData(png) for png in self.more_images)]
        for number, image in enumerate(pictures, start=1):
            item = QListWidgetItem(str(number))
            if not image.isNull():
                item.setIcon(QIcon(QPixmap.fromImage(image.scaled(
                    INPUT_PX, INPUT_PX, Qt.AspectRatioMode.KeepAspectRatio,
                    Qt.TransformationMode.SmoothTransformation,
                ))))  # fmt: skip
            self.inputs.addItem(item)
        self.inputs.setCurrentRow(min(selected, len(pictures) - 1))
        self.inputs.blockSignals(False)
        limit = self.chosen_model().images
        room = len(pictures) < limit
        self.add_image.setEnabled(room)
        self.paste_image.setEnabled(room)
        self.remove_image.setEnabled(self.inputs.currentRow() >= 1)
        self.inputs_count.setText(
            self.tr("{count} of at most {limit}").format(count=len(pictures), limit=limit)
        )

    def queued(self, job_id: int) -> None:
        self.status_line.setText(self.tr("Edit queued as job {id}").format(id=job_id))

    def refused(self, sentence: str) -> None:
        self.status_line.setText(sentence)

    def set_picture(self, image: QImage) -> None:
        """The edited job's picture, once that job has finished."""
        self.picture = image
        self._show_after(self.before_after.isChecked())
        self._update_inputs()

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

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """On the input row: Paste adds the clipboard's picture, Delete removes the
        selected one (the row's own keys otherwise)."""
        pressed = isinstance(event, QKeyEvent) and event.type() == QEvent.Type.KeyPress
        if watched is self.inputs and pressed:
            assert isinstance(event, QKeyEvent)
            if event.matches(QKeySequence.StandardKey.Paste):
                self._add_pasted()
                return True
            if event.matches(QKeySequence.StandardKey.Delete):
                self._remove_selected()
                return True
        return super().eventFilter(watched, event)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        """A dropped picture is one more input image where the model reads several and has
        room; otherwise it is edited in a dialog of its own."""
        for url in event.mimeData().urls():
            if not url.isLocalFile():
                continue
            path = Path(url.toLocalFile())
            image = QImage(str(path))
            if image.isNull() or not self.add_input(png_of(image)):
                self.file_dropped.emit(path)

    def shown_image(self) -> str:
        """Which picture the thumbnail shows: "before" or "after" (tests, screenshots)."""
        after = self.before_after.isChecked() and not self.result_image.isNull()
        return "after" if after else "before"
