"""The mask editor: paint what to repaint on any image (an Easel result, a dropped or pasted
file), then "Inpaint" it or "Extend canvas"; the result is shown over the original with a
before/after toggle.

Keys as painting programs have them: [ and ] brush size, X brush/eraser, Ctrl+Z undo,
Ctrl+Shift+Z (and Ctrl+Y) redo, Ctrl+I invert, F fit, Ctrl+= / Ctrl+- zoom, B before/after.
Middle-drag or Alt+drag pans, the wheel zooms. It submits nothing itself: it emits what was
asked for and the window's hook (`mask_hook`) turns that into a job.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.engine.jobs.mask import Extension, Fill
from app.engine.jobs.params import (
    DEFAULT_MASK_BLUR,
    DEFAULT_MASK_PADDING,
    MAX_MASK_BLUR,
    MAX_MASK_PADDING,
    MAX_SIZE,
    SIZE_MULTIPLE,
)
from app.ui.presenters.inpaint_requests import DEFAULT_INPAINT_STRENGTH, InpaintSettings
from app.ui.widgets.mask_canvas import MAX_BRUSH, MIN_BRUSH, ZOOM_STEP, MaskCanvas

BRUSH_STEP = 1.2  # [ and ] change the size by a fifth, as Krita does


class MaskEditor(QDialog):
    inpaint_requested = Signal(object)  # (InpaintSettings, mask PNG bytes)
    extend_requested = Signal(object)  # (prompt, Extension, Fill)
    file_dropped = Signal(object)  # a Path dropped on the editor: open it in another editor

    def __init__(self, picture: QImage, prompt: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Fix part of the picture"))
        self.resize(1000, 760)
        self.canvas = MaskCanvas()
        self.canvas.set_picture(picture)
        self.result_image = QImage()
        self.prompt = QLineEdit(prompt)
        self.prompt.setPlaceholderText(self.tr("What to paint there"))
        self.status_line = QLabel()
        self.status_line.setObjectName("caption")
        layout = QHBoxLayout(self)
        layout.addWidget(self.canvas, 1)
        side = QVBoxLayout()
        side.addWidget(self._tools())
        side.addWidget(self._inpaint_box())
        side.addWidget(self._extend_box())
        side.addStretch(1)
        side.addWidget(self.status_line)
        layout.addLayout(side)
        self._shortcuts()
        self.setAcceptDrops(True)
        self.canvas.changed.connect(self._update_buttons)
        self._update_buttons()

    # --- panels -------------------------------------------------------------------------------

    def _tools(self) -> QGroupBox:
        box = QGroupBox(self.tr("Mask"))
        form = QFormLayout(box)
        self.brush = QPushButton(self.tr("Brush"))
        self.brush.setCheckable(True)
        self.brush.setChecked(True)
        self.brush.setToolTip("X")
        self.brush.toggled.connect(self._set_erasing)
        self.size_slider = self._slider(MIN_BRUSH, MAX_BRUSH, self.canvas.brush_size)
        self.size_slider.valueChanged.connect(self.canvas.set_brush_size)
        self.hardness = self._slider(0, 100, round(self.canvas.hardness * 100))
        self.hardness.valueChanged.connect(lambda v: setattr(self.canvas, "hardness", v / 100))
        self.opacity = self._slider(0, 100, round(self.canvas.opacity * 100))
        self.opacity.valueChanged.connect(self._set_opacity)
        form.addRow(self.brush)
        form.addRow(self.tr("Size"), self.size_slider)
        form.addRow(self.tr("Hardness"), self.hardness)
        form.addRow(self.tr("Mask opacity"), self.opacity)
        row = QHBoxLayout()
        self.buttons: dict[str, QPushButton] = {}
        for name, text, slot in (
            ("undo", self.tr("Undo"), self.canvas.undo),
            ("redo", self.tr("Redo"), self.canvas.redo),
            ("invert", self.tr("Invert"), self.canvas.invert),
            ("clear", self.tr("Clear"), self.canvas.clear),
        ):
            button = QPushButton(text)
            button.clicked.connect(slot)
            self.buttons[name] = button
            row.addWidget(button)
        form.addRow(row)
        views = QHBoxLayout()
        self.before_after = QPushButton(self.tr("After"))
        self.before_after.setCheckable(True)
        self.before_after.setToolTip("B")
        self.before_after.toggled.connect(self._show_after)
        fit = QPushButton(self.tr("Fit"))
        fit.clicked.connect(self.canvas.fit)
        views.addWidget(self.before_after)
        views.addWidget(fit)
        form.addRow(views)
        return box

    def _inpaint_box(self) -> QGroupBox:
        box = QGroupBox(self.tr("Inpaint"))
        form = QFormLayout(box)
        form.addRow(self.tr("Prompt"), self.prompt)
        self.strength = QDoubleSpinBox(minimum=0.05, maximum=1.0, singleStep=0.05)
        self.strength.setValue(DEFAULT_INPAINT_STRENGTH)
        self.blur = QSpinBox(minimum=0, maximum=MAX_MASK_BLUR, value=DEFAULT_MASK_BLUR)
        self.only_masked = QCheckBox(self.tr("Only masked"))
        self.padding = QSpinBox(minimum=0, maximum=MAX_MASK_PADDING, value=DEFAULT_MASK_PADDING)
        form.addRow(self.tr("Denoising strength"), self.strength)
        form.addRow(self.tr("Mask blur"), self.blur)
        form.addRow(self.only_masked)
        form.addRow(self.tr("Masked area padding"), self.padding)
        self.inpaint = QPushButton(self.tr("Inpaint"))
        self.inpaint.setDefault(True)
        self.inpaint.clicked.connect(self._inpaint)
        form.addRow(self.inpaint)
        return box

    def _extend_box(self) -> QGroupBox:
        box = QGroupBox(self.tr("Extend canvas"))
        form = QFormLayout(box)
        self.sides: dict[str, QSpinBox] = {}
        for side, text in (
            ("left", self.tr("Left")), ("right", self.tr("Right")),
            ("top", self.tr("Top")), ("bottom", self.tr("Bottom")),
        ):  # fmt: skip
            spin = QSpinBox(minimum=0, maximum=MAX_SIZE, singleStep=64)
            spin.setSingleStep(SIZE_MULTIPLE * 8)
            self.sides[side] = spin
            form.addRow(text, spin)
        self.fill = QComboBox()
        self.fill.addItem(self.tr("Edge colours"), Fill.EDGE)
        self.fill.addItem(self.tr("Noise"), Fill.NOISE)
        form.addRow(self.tr("New area"), self.fill)
        self.extend = QPushButton(self.tr("Extend canvas"))
        self.extend.clicked.connect(self._extend)
        form.addRow(self.extend)
        return box

    def _slider(self, low: int, high: int, value: int) -> QSlider:
        slider = QSlider(Qt.Orientation.Horizontal)
        slider.setRange(low, high)
        slider.setValue(value)
        return slider

    def _shortcuts(self) -> None:
        for keys, slot in (
            ("[", lambda: self._grow(1 / BRUSH_STEP)),
            ("]", lambda: self._grow(BRUSH_STEP)),
            ("X", self.brush.toggle),
            ("Ctrl+Z", self.canvas.undo),
            ("Ctrl+Shift+Z", self.canvas.redo),
            ("Ctrl+Y", self.canvas.redo),
            ("Ctrl+I", self.canvas.invert),
            ("F", self.canvas.fit),
            ("Ctrl+=", lambda: self.canvas.zoom_by(ZOOM_STEP)),
            ("Ctrl+-", lambda: self.canvas.zoom_by(1 / ZOOM_STEP)),
            ("B", self.before_after.toggle),
        ):
            QShortcut(QKeySequence(keys), self, slot)

    # --- what the controls do -----------------------------------------------------------------

    def _grow(self, factor: float) -> None:
        self.canvas.grow_brush(factor)
        self.size_slider.setValue(self.canvas.brush_size)

    def _set_erasing(self, brush: bool) -> None:
        self.canvas.erasing = not brush
        self.brush.setText(self.tr("Brush") if brush else self.tr("Eraser"))

    def _set_opacity(self, value: int) -> None:
        self.canvas.opacity = value / 100
        self.canvas.update()

    def _show_after(self, after: bool) -> None:
        shown = (
            self.result_image if after and not self.result_image.isNull() else self.canvas.picture
        )
        self.canvas.mask_visible = not after
        self.canvas.show_picture(shown)
        self.before_after.setText(self.tr("Before") if after else self.tr("After"))

    def _update_buttons(self) -> None:
        self.buttons["undo"].setEnabled(self.canvas.can_undo)
        self.buttons["redo"].setEnabled(self.canvas.can_redo)
        self.inpaint.setEnabled(not self.canvas.is_empty())
        self.before_after.setEnabled(not self.result_image.isNull())

    def settings(self) -> InpaintSettings:
        return InpaintSettings(
            prompt=self.prompt.text().strip(), strength=round(self.strength.value(), 2),
            mask_blur=self.blur.value(), only_masked=self.only_masked.isChecked(),
            padding=self.padding.value(),
        )  # fmt: skip

    def extension(self) -> Extension:
        return Extension(**{side: spin.value() for side, spin in self.sides.items()})

    def _inpaint(self) -> None:
        self.inpaint_requested.emit((self.settings(), self.canvas.mask_png()))
        self.status_line.setText(self.tr("Inpaint queued"))

    def _extend(self) -> None:
        fill: Fill = self.fill.currentData()
        self.extend_requested.emit((self.prompt.text().strip(), self.extension(), fill))
        self.status_line.setText(self.tr("Extension queued"))

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.file_dropped.emit(Path(url.toLocalFile()))

    def set_result(self, image: QImage) -> None:
        """The finished inpaint: shown at once ("after"), the toggle goes back and forth."""
        if image.size() != self.canvas.picture.size():
            self.status_line.setText(self.tr("The result is ready ({w}x{h})").format(
                w=image.width(), h=image.height()))  # fmt: skip
            return
        self.result_image = image
        self._update_buttons()
        self.before_after.setChecked(True)
        self._show_after(True)
