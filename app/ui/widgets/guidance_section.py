"""The prompt panel's "Control" section: ControlNet layers and reference images.

A layer comes from a file, a paste or a drop; each row shows the preprocessed image (what
the job will store), its preprocessor and ControlNet, weight and start/end, and can be
switched off or removed; weight and start/end are sliders with their number beside them.
Reference images (IP-Adapter; Flux.1 Redux on Flux.1) have a row each with their model and
weight.
`install_guidance(window)` puts the section under the form and makes Generate queue the
form with its layers (and the mask editor's inpaint, `guided`); the window's own files
only call it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QGuiApplication, QImage, QPixmap
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.jobs.params import (
    CONTROL_MODULES,
    MAX_CONTROL_WEIGHT,
    InvalidParameters,
)
from app.errors import UserError
from app.ui.presenters.guidance import (
    GuideLayer,
    controlnet_names,
    controlnet_union_types,
    guided_job,
    reference_model_names,
    with_guidance,
)
from app.ui.presenters.i18n import translate
from app.ui.presenters.png_params import ParsedParams

if TYPE_CHECKING:
    from app.engine.jobs.follow_ups import NewJob
    from app.ui.widgets.window_parts import WindowParts

THUMB = 56
IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.webp *.bmp)"


def module_labels() -> dict[str, str]:
    """The preprocessors as the picker names them."""
    return {
        "none": translate("GuidanceSection", "none (a control image)"),
        "canny": translate("GuidanceSection", "canny edges"),
        "softedge": translate("GuidanceSection", "soft edges"),
        "lineart": translate("GuidanceSection", "lineart (a drawing)"),
        "scribble": translate("GuidanceSection", "scribble (a sketch)"),
    }


class ValueSlider(QWidget):
    """A slider with its caption and its number beside it, in hundredths (0.05 a key press):
    what A1111's and Krita's control weight and start/end are."""

    valueChanged = Signal(float)
    SCALE = 100

    def __init__(self, caption: str, value: float, top: float) -> None:
        super().__init__()
        self.caption = QLabel(caption)
        self.caption.setMinimumWidth(44)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, round(top * self.SCALE))
        self.slider.setSingleStep(5)
        self.slider.setPageStep(10)
        self.number = QLabel()
        self.number.setMinimumWidth(32)
        self.number.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.caption)
        row.addWidget(self.slider, 1)
        row.addWidget(self.number)
        self.slider.valueChanged.connect(self._moved)
        self.setValue(value)
        self._moved(self.slider.value())

    def value(self) -> float:
        return self.slider.value() / self.SCALE

    def setValue(self, value: float) -> None:  # Qt's spelling, as the spin box it replaces
        self.slider.setValue(round(value * self.SCALE))

    def setToolTip(self, text: str) -> None:
        super().setToolTip(text)
        self.slider.setToolTip(text)

    def _moved(self, steps: int) -> None:
        self.number.setText(f"{steps / self.SCALE:.2f}")
        self.valueChanged.emit(steps / self.SCALE)


def _thumbnail(png: bytes) -> QPixmap:
    image = QImage.fromData(png)
    return QPixmap.fromImage(image).scaled(
        THUMB, THUMB, Qt.AspectRatioMode.KeepAspectRatio,
        Qt.TransformationMode.SmoothTransformation,
    )  # fmt: skip


class LayerRow(QFrame):
    """One control layer or reference image."""

    def __init__(
        self,
        layer: GuideLayer,
        models: list[str],
        control: bool,
        remove: Callable[[], None],
        move_up: Callable[[], None] = lambda: None,
        types_of: Callable[[str], Sequence[str]] = controlnet_union_types,
    ) -> None:
        """`types_of(net)`: the control types ControlNet `net` is told (a Union's table)."""
        super().__init__()
        self.layer = layer
        self._control = control
        self._types_of = types_of
        self.setObjectName("guideLayer")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.enabled = QCheckBox()
        self.enabled.setChecked(layer.enabled)
        self.enabled.setToolTip(translate("GuidanceSection", "Use this layer"))
        self.thumb = QLabel()
        self.thumb.setFixedSize(THUMB, THUMB)
        self.thumb.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.thumb.setWordWrap(True)
        self.setAcceptDrops(True)  # an image dropped on a row is its image
        self.module = QComboBox()
        labels = module_labels()
        for name in CONTROL_MODULES:
            self.module.addItem(labels[name], name)
        self.module.setCurrentIndex(CONTROL_MODULES.index(layer.module))
        self.module.setVisible(control)
        self.control_type = QComboBox()  # only a ControlNet Union reads it: its own table
        self.control_type.setToolTip(
            translate("GuidanceSection", "The control type a ControlNet Union is told")
        )
        self.model = QComboBox()
        self.model.addItems(models or [""])
        if layer.model in models:
            self.model.setCurrentText(layer.model)
        layer.model = self.model.currentText()
        self._offer_types()
        self.weight = ValueSlider(
            translate("GuidanceSection", "Weight"), layer.weight, MAX_CONTROL_WEIGHT
        )
        self.start = ValueSlider(translate("GuidanceSection", "Start"), layer.start, 1.0)
        self.end = ValueSlider(translate("GuidanceSection", "End"), layer.end, 1.0)
        self.weight.setToolTip(translate("GuidanceSection", "How strongly it guides (0-2)"))
        self.start.setToolTip(
            translate("GuidanceSection", "Start: the share of steps before it acts")
        )
        self.end.setToolTip(translate("GuidanceSection", "End: the share of steps it acts until"))
        self.start.setVisible(control)
        self.end.setVisible(control)
        self.remove = QToolButton()
        self.remove.setText("✕")
        self.remove.setToolTip(translate("GuidanceSection", "Remove"))
        self.remove.clicked.connect(remove)
        self.up = QToolButton()
        self.up.setText("↑")
        self.up.setToolTip(translate("GuidanceSection", "Move up"))
        self.up.clicked.connect(move_up)
        choices = QVBoxLayout()
        choices.setSpacing(4)
        choices.addWidget(self.module)
        choices.addWidget(self.model)
        choices.addWidget(self.control_type)
        choices.addWidget(self.weight)
        choices.addWidget(self.start)
        choices.addWidget(self.end)
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 6, 6, 6)
        row.addWidget(self.enabled)
        row.addWidget(self.thumb)
        row.addLayout(choices, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.remove)
        buttons.addWidget(self.up)
        buttons.addStretch(1)
        row.addLayout(buttons)
        self.module.currentIndexChanged.connect(self._module_changed)
        self.model.currentTextChanged.connect(self._model_changed)
        self.enabled.toggled.connect(lambda on: setattr(layer, "enabled", on))
        self.control_type.currentIndexChanged.connect(self._type_changed)
        self.weight.valueChanged.connect(lambda v: setattr(layer, "weight", v))
        self.start.valueChanged.connect(lambda v: setattr(layer, "start", v))
        self.end.valueChanged.connect(lambda v: setattr(layer, "end", v))
        self._show_output()

    def _model_changed(self, name: str) -> None:
        self.layer.model = name
        self._offer_types()

    def _offer_types(self) -> None:
        """The type box offers the chosen net's own control types (Flux.1's Union table is
        not SDXL's), keeping the layer's type where the table has it; a single-mode net
        is told none, so the box is hidden and the layer's type cleared."""
        types = list(self._types_of(self.layer.model)) if self._control else []
        kept = self.layer.control_type if self.layer.control_type in types else ""
        self.control_type.blockSignals(True)  # filled whole before the layer reads it
        self.control_type.clear()
        self.control_type.addItem(translate("GuidanceSection", "type: from the preprocessor"), "")
        for name in types:
            self.control_type.addItem(
                translate("GuidanceSection", "type: {name}").format(name=name), name
            )
        self.control_type.setCurrentIndex(self.control_type.findData(kept))
        self.control_type.blockSignals(False)
        self.control_type.setVisible(bool(types))
        self.layer.control_type = kept

    def _type_changed(self) -> None:
        self.layer.control_type = str(self.control_type.currentData() or "")

    def _module_changed(self) -> None:
        self.layer.module = str(self.module.currentData())
        self._show_output()

    def set_source(self, png: bytes) -> None:
        """Give the row its image (a layer restored from a PNG has none yet)."""
        previous = self.layer.source
        self.layer.source = png
        try:
            self._show_output()
        except UserError:
            self.layer.source = previous
            raise
        self.enabled.setEnabled(True)
        self.enabled.setChecked(True)

    def _show_output(self) -> None:
        if self.layer.waiting:
            self.thumb.setText(translate("GuidanceSection", "drop its image here"))
            self.enabled.setChecked(False)
            self.enabled.setEnabled(False)
            return
        self.thumb.setPixmap(_thumbnail(self.layer.image))  # the preprocessed image

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        urls = [url for url in event.mimeData().urls() if url.isLocalFile()]
        if urls:
            event.acceptProposedAction()
            self.set_source(Path(urls[0].toLocalFile()).read_bytes())


class GuideList(QWidget):
    """Control layers (`control=True`) or reference images, with their add buttons."""

    def __init__(self, title: str, control: bool, models: Callable[[], list[str]]) -> None:
        super().__init__()
        self.control = control
        self._models = models
        self.rows: list[LayerRow] = []
        self.setAcceptDrops(True)
        header = QHBoxLayout()
        caption = QLabel(title)
        caption.setObjectName("sectionTitle")
        header.addWidget(caption, 1)
        self.add_file = QPushButton(translate("GuidanceSection", "Add…"))
        self.add_file.setToolTip(
            translate("GuidanceSection", "Add an image from a file (or drop or paste one here)")
        )
        self.add_file.clicked.connect(self._choose)
        self.paste = QPushButton(translate("GuidanceSection", "Paste"))
        self.paste.clicked.connect(self.paste_image)
        header.addWidget(self.add_file)
        header.addWidget(self.paste)
        self._header = header
        self._list = QVBoxLayout()
        self._list.setSpacing(4)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        layout.addLayout(self._list)

    @property
    def layers(self) -> list[GuideLayer]:
        return [row.layer for row in self.rows]

    def add(self, png: bytes, module: str = "canny") -> LayerRow:
        layer = GuideLayer(png, module=module if self.control else "none")
        layer.image  # noqa: B018 - preprocess now: a broken image is refused here, not later
        return self.add_layer(layer)

    def add_layer(self, layer: GuideLayer) -> LayerRow:
        row = LayerRow(
            layer, self._models(), self.control, lambda: self._remove(row),
            lambda: self.move_up(row),
        )  # fmt: skip
        self.rows.append(row)
        self._list.addWidget(row)
        self._grown()
        return row

    def move_up(self, row: LayerRow) -> None:
        """Layers act in order (their residuals are summed in it): one place earlier."""
        index = self.rows.index(row)
        if index == 0:
            return
        self.rows[index - 1], self.rows[index] = row, self.rows[index - 1]
        self._list.removeWidget(row)
        self._list.insertWidget(index - 1, row)

    def add_source(self, text: str, tip: str, source: Callable[[], bytes | None]) -> None:
        """One more way to add a layer (the window's: its selected result)."""
        button = QPushButton(text)
        button.setToolTip(tip)

        def add() -> None:
            png = source()
            if png is not None:
                try:
                    self.add(png)
                except UserError as error:
                    self._error(str(error))

        button.clicked.connect(add)
        self._header.insertWidget(self._header.count() - 2, button)

    def _grown(self) -> None:
        # The panel's layout keeps the section's old size hint until told: rows come and go.
        widget: QWidget | None = self
        while widget is not None:
            widget.updateGeometry()
            widget = widget.parentWidget()

    def add_file_path(self, path: Path) -> None:
        try:
            self.add(path.read_bytes())
        except (OSError, UserError) as error:
            self._error(str(error))

    def paste_image(self) -> None:
        image = QGuiApplication.clipboard().image()
        if image.isNull():
            self._error(translate("GuidanceSection", "The clipboard holds no image"))
            return
        buffer = QBuffer()
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        image.save(buffer, "PNG")  # type: ignore[call-overload]
        self.add(bytes(QByteArray(buffer.data()).data()))

    def _remove(self, row: LayerRow) -> None:
        self.rows.remove(row)
        row.setParent(None)
        row.deleteLater()
        self._grown()

    def _choose(self) -> None:
        name, _ = QFileDialog.getOpenFileName(
            self, translate("GuidanceSection", "Add an image"), "", IMAGE_FILTER
        )
        if name:
            self.add_file_path(Path(name))

    def _error(self, message: str) -> None:
        show = getattr(self.window(), "show_error", None)
        if callable(show):
            show(message)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.add_file_path(Path(url.toLocalFile()))
        event.acceptProposedAction()


class GuidanceSection(QWidget):
    """ "Control": ControlNet layers, then reference images."""

    def __init__(
        self,
        controlnets: Callable[[], list[str]] = controlnet_names,
        adapters: Callable[[], list[str]] = reference_model_names,
    ) -> None:
        super().__init__()
        self.setObjectName("guidanceSection")
        self.controls = GuideList(
            translate("GuidanceSection", "Control layers (ControlNet)"), True, controlnets
        )
        self.references = GuideList(
            translate("GuidanceSection", "Reference images (IP-Adapter, Flux.1 Redux)"),
            False,
            adapters,
        )
        # Folded by default: the form keeps its height until an artist opens it.
        self.toggle = QToolButton()
        self.toggle.setText(translate("GuidanceSection", "Control"))
        self.toggle.setCheckable(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setAutoRaise(True)
        self.body = QWidget()
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        body.addWidget(self.controls)
        body.addWidget(self.references)
        self.body.setVisible(False)
        self.toggle.toggled.connect(self.unfold)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.body)

    def unfold(self, on: bool = True) -> None:
        self.toggle.setChecked(on)
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body.setVisible(on)

    def in_use(self) -> bool:
        layers = self.controls.layers + self.references.layers
        return any(layer.enabled and not layer.waiting for layer in layers)

    def restore(self, parsed: ParsedParams) -> None:
        """A dropped PNG's control layers (their ControlNet installed), waiting for their
        images: a PNG does not carry them."""
        for layer in parsed.control:
            self.controls.add_layer(
                GuideLayer(
                    b"",
                    layer.model,
                    layer.module,
                    layer.weight,
                    layer.start,
                    layer.end,
                    control_type=layer.control_type,
                )
            )
        if parsed.control:
            self.unfold()


def install_guidance(window: WindowParts) -> GuidanceSection:
    """Put the section under the prompt panel's form; Generate then queues the form with
    the section's layers (through `submit_job`) whenever one is switched on."""
    # A new layer offers the ControlNets made for the form's model (any, for an unknown one).
    section = GuidanceSection(
        controlnets=lambda: controlnet_names(window.prompt.model_choice().architecture)
    )
    layout = window.prompt.layout()
    assert isinstance(layout, QVBoxLayout)
    layout.insertWidget(layout.indexOf(window.prompt.reset) + 1, section)
    window.prompt.settings_read.connect(section.restore)
    for guides in (section.controls, section.references):
        guides.add_source(
            translate("GuidanceSection", "Result"),
            translate("GuidanceSection", "Add the selected job's image"),
            lambda: _selected_result(window),
        )
    return section


def _selected_result(window: WindowParts) -> bytes | None:
    """The image of the job selected in the list, or None (saying why)."""
    row = window.jobs.current_row()
    if row is None or not row.has_picture or not row.output_path:
        window.show_error(translate("GuidanceSection", "Select a finished job first"))
        return None
    try:
        return Path(row.output_path).read_bytes()
    except OSError as error:
        window.show_error(str(error))
        return None


def guided(section: GuidanceSection | None, job: NewJob) -> NewJob:
    """`job` guided by the window's Control section (its enabled layers and references)."""
    if section is None:
        return job
    return with_guidance(job, section.controls.layers, section.references.layers)


def guided_submit(window: WindowParts, section: GuidanceSection) -> bool:
    """Queue the form with the section's layers; False when none is in use (or refused)."""
    if not section.in_use():
        return False
    try:
        params = window.prompt.params()
        job = guided_job(
            params, window.prompt.image_count(), section.controls.layers,
            section.references.layers, init_png=window.prompt.init_png(),
        )  # fmt: skip
    except (InvalidParameters, UserError) as error:
        window.show_error(translate("GuidanceSection", "Not queued: {error}").format(error=error))
        return True
    window.vm.submit_job(job)
    return True
