"""The "Last frame" picker of the form, beside the init image: a first-and-last-frame model
(Wan 2.1 FLF2V) draws the clip between the init image (its first frame) and this image.
Shown by the prompt panel only for a model that takes one; the engine stores it with the job
as it stores the init image (`RunInputs.last_image`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.errors import UserError
from app.ui.presenters import number_rules as rules
from app.ui.presenters.number_rules import format_number
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
        self.strength.setToolTip(
            self.tr("How firmly the clip holds this frame: 1 exactly, lower lets it move away")
        )
        self.frame = NumberEdit(rules.LAST_FRAME_AT)  # blank: the clip's last frame
        self.frame.setToolTip(
            self.tr("The frame this image is, counted from 0 (blank: the clip's last)")
        )
        picked = QHBoxLayout()
        picked.addWidget(self.choose)
        picked.addWidget(self.thumb)
        picked.addWidget(self.caption, 1)
        picked.addWidget(self.clear)
        # Under the picked frame, on a line of their own and named: beside it they squeezed
        # its caption to a word a line and read as two unnamed numbers.
        self.weights = named_fields(
            (self.tr("Last frame strength"), self.strength), (self.tr("at frame"), self.frame)
        )
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addLayout(picked)
        column.addWidget(self.weights)
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
        self.weights.setVisible(self.strength_in_use())
        self.caption.setText(
            self.tr("Ends on {source} ({w} × {h})").format(
                source=self.image.source, w=self.image.width, h=self.image.height
            )
            if self.image is not None
            else self.tr("No last frame: the model ends the clip as it goes")
        )


def named_fields(*pairs: tuple[str, NumberEdit]) -> QWidget:
    """One line of number fields, each after its label (the label's buddy: a click on it
    goes to the field), each field as wide as its widest number or its placeholder."""
    line = QWidget()
    layout = QHBoxLayout(line)
    layout.setContentsMargins(0, 0, 0, 0)
    for text, field in pairs:
        label = QLabel(text)
        label.setBuddy(field)
        _fit_width(field)
        layout.addWidget(label)
        layout.addWidget(field)
    layout.addStretch(1)
    return line


def _fit_width(field: NumberEdit) -> None:
    """Wide enough for the field's widest number and its placeholder (a blank frame's "the
    end": at 72 px it showed as "t…"). The 40 px are the style sheet's padding and border
    and the field's own margins, with room to spare."""
    metrics = field.fontMetrics()
    rule = field.rule
    fraction = "0." + "5" * rule.decimals  # the widest a strength's 0.75 gets
    texts = (format_number(rule.high), format_number(rule.low), fraction, field.placeholderText())
    field.setFixedWidth(max(metrics.horizontalAdvance(text) for text in texts) + 40)
