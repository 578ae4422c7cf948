"""The "Last frame" picker of the form, beside the init image: a first-and-last-frame model
(Wan 2.1 FLF2V) draws the clip between the init image (its first frame) and this image.
Shown by the prompt panel only for a model that takes one; the engine stores it with the job
as it stores the init image (`RunInputs.last_image`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QToolButton, QWidget

from app.errors import UserError
from app.ui.presenters import number_rules as rules
from app.ui.presenters.queue_service import InitImage, QueueService
from app.ui.widgets.number_field import NumberEdit

THUMB = 56  # px, as the init image's thumbnail
AskPath = Callable[[QWidget], Path | None]


def ask_image_file(parent: QWidget) -> Path | None:
    """The image file the artist picks (None: cancelled)."""
    title = QCoreApplication.translate("LastFrameRow", "Choose the clip's last frame")
    filters = QCoreApplication.translate("LastFrameRow", "Images (*.png *.jpg *.jpeg *.webp *.bmp)")
    chosen, _filter = QFileDialog.getOpenFileName(parent, title, "", filters)
    return Path(chosen) if chosen else None


class LastFrameRow(QWidget):
    """A button that picks the clip's last frame, its thumbnail and a way to drop it."""

    problem = Signal(str)  # the picked file cannot be an image: one sentence for the banner

    def __init__(self, parent: QWidget | None = None, ask_path: AskPath = ask_image_file) -> None:
        super().__init__(parent)
        self._ask_path = ask_path
        self.image: InitImage | None = None
        self.choose = QToolButton()
        self.choose.setText(self.tr("Last frame…"))
        self.choose.setToolTip(
            self.tr("The clip's last frame: the model draws the frames between the init image "
                    "and this one")
        )  # fmt: skip
        self.choose.clicked.connect(self.pick)
        self.thumb = QLabel()
        self.thumb.setFixedSize(THUMB, THUMB)
        self.thumb.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.clear = QToolButton()
        self.clear.setText(self.tr("Remove"))
        self.clear.setToolTip(self.tr("End the clip where the model takes it, without this image"))
        self.clear.clicked.connect(self.drop)
        self.weighs = False  # whether the model takes a strength for it (`set_weighing`)
        self.strength = NumberEdit(rules.LAST_FRAME_STRENGTH, step=0.05)
        self.strength.setValue(1.0)
        self.strength.setMaximumWidth(64)
        self.strength.setToolTip(
            self.tr("How firmly the clip holds this frame: 1 exactly, lower lets it move away")
        )
        self.frame = NumberEdit(rules.LAST_FRAME_AT)  # blank: the clip's last frame
        self.frame.setMaximumWidth(72)
        self.frame.setToolTip(
            self.tr("The frame this image is, counted from 0 (blank: the clip's last)")
        )
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.choose)
        row.addWidget(self.thumb)
        row.addWidget(self.caption, 1)
        row.addWidget(self.strength)
        row.addWidget(self.frame)
        row.addWidget(self.clear)
        self._show()

    def pick(self) -> None:
        """Ask for an image file and take it (a small file read: the picker waits anyway)."""
        path = self._ask_path(self)
        if path is None:
            return
        try:
            self.set_image(QueueService.prepare_init(path, path.name))
        except UserError as error:  # its sentence says "init image": this one ends the clip
            self.problem.emit(str(error).replace("The init image", "The last frame", 1))

    def set_image(self, image: InitImage) -> None:
        self.image = image
        self.thumb.setPixmap(
            QPixmap.fromImage(QImage.fromData(image.png)).scaled(
                THUMB, THUMB, Qt.AspectRatioMode.KeepAspectRatio,
                Qt.TransformationMode.SmoothTransformation,
            )
        )  # fmt: skip
        self._show()

    def drop(self) -> None:
        self.image = None
        self._show()

    def png(self) -> bytes | None:
        return None if self.image is None else self.image.png

    def set_weighing(self, weighs: bool) -> None:
        """Whether the model takes a strength for the last frame (its field shown with one)."""
        self.weighs = weighs
        self._show()

    def strength_in_use(self) -> bool:
        """Whether the strength and frame fields count: a picked frame on a model that
        weighs it."""
        return self.weighs and self.image is not None

    def _show(self) -> None:
        shown = self.image is not None
        self.thumb.setVisible(shown)
        self.clear.setVisible(shown)
        self.strength.setVisible(self.strength_in_use())
        self.frame.setVisible(self.strength_in_use())
        self.caption.setText(
            self.tr("Ends on {source} ({w} × {h})").format(
                source=self.image.source, w=self.image.width, h=self.image.height
            )
            if self.image is not None
            else self.tr("No last frame: the model ends the clip as it goes")
        )
