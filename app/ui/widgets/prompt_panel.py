"""The prompt form: what to draw and how, plus dropping an Easel/A1111 PNG to reuse its settings."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QRegularExpressionValidator
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.params import (
    DEFAULT_MODEL,
    MAX_CFG,
    MAX_SEED,
    MAX_SIZE,
    MAX_STEPS,
    MIN_CFG,
    MIN_SIZE,
    MIN_STEPS,
    RANDOM_SEED,
    SCHEDULERS,
    SIZE_MULTIPLE,
    GenerationParams,
    InvalidParameters,
)
from app.ui.presenters.png_params import NoParameters, read_png_params
from app.ui.qt.icons import dice_icon

SIZE_PRESETS: tuple[tuple[str, int, int], ...] = (
    ("64 × 64 · tiny model", 64, 64),
    ("256 × 256", 256, 256),
    ("512 × 512", 512, 512),
    ("512 × 768 · portrait", 512, 768),
    ("768 × 512 · landscape", 768, 512),
    ("768 × 768", 768, 768),
    ("1024 × 1024", 1024, 1024),
)
CUSTOM = "Custom"
MAX_COUNT = 16


class PromptPanel(QWidget):
    generate_requested = Signal()
    message = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptPanel")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)  # paint the QSS panel colour
        self.setAcceptDrops(True)
        self._build()
        self.set_params(GenerationParams(prompt=""))

    # --- building -----------------------------------------------------------------------------

    def _build(self) -> None:
        self.prompt = QPlainTextEdit()
        self.prompt.setPlaceholderText("Describe the picture… (Ctrl+Enter to generate)")
        self.prompt.setTabChangesFocus(True)
        self.negative = QPlainTextEdit()
        self.negative.setPlaceholderText("What to keep out of it")
        self.negative.setTabChangesFocus(True)
        self.negative.setMaximumHeight(64)
        self.model = QComboBox()
        self.model.setEditable(False)
        self.scheduler = QComboBox()
        self.scheduler.addItems(SCHEDULERS)
        self.steps = _spin(MIN_STEPS, MAX_STEPS)
        self.cfg = QDoubleSpinBox()
        self.cfg.setRange(MIN_CFG, MAX_CFG)
        self.cfg.setSingleStep(0.5)
        self.cfg.setDecimals(1)
        self.seed = QLineEdit()
        self.seed.setPlaceholderText("random")
        self.seed.setValidator(QRegularExpressionValidator(r"\d{0,10}"))
        self.dice = QToolButton()
        self.dice.setIcon(dice_icon())
        self.dice.setToolTip("Pick a random seed (empty: a new one for every image)")
        self.dice.clicked.connect(self.roll_seed)
        self.size_preset = QComboBox()
        self.size_preset.addItems([name for name, _w, _h in SIZE_PRESETS] + [CUSTOM])
        self.size_preset.currentIndexChanged.connect(self._preset_chosen)
        self.width_box = _spin(MIN_SIZE, MAX_SIZE, SIZE_MULTIPLE)
        self.height_box = _spin(MIN_SIZE, MAX_SIZE, SIZE_MULTIPLE)
        for box in (self.width_box, self.height_box):
            box.valueChanged.connect(self._size_edited)
        self.count = _spin(1, MAX_COUNT)
        self.count.valueChanged.connect(self._label_generate)
        self.generate = QPushButton("Generate")
        self.generate.setObjectName("primary")
        self.generate.setToolTip("Queue the image(s) — Ctrl+Enter")
        self.generate.clicked.connect(self.generate_requested)
        self._lay_out()

    def _lay_out(self) -> None:
        seed_row = _row(self.seed, self.dice)
        size_row = _row(self.width_box, QLabel("×"), self.height_box)
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        form.setHorizontalSpacing(12)
        form.setVerticalSpacing(8)
        form.addRow("Model", self.model)
        form.addRow("Sampler", self.scheduler)
        form.addRow("Steps", self.steps)
        form.addRow("CFG", self.cfg)
        form.addRow("Seed", seed_row)
        form.addRow("Size", self.size_preset)
        form.addRow("", size_row)
        form.addRow("Images", self.count)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 14, 14, 14)
        layout.setSpacing(8)
        layout.addWidget(_title("Prompt"))
        layout.addWidget(self.prompt, 3)
        layout.addWidget(_title("Negative prompt"))
        layout.addWidget(self.negative)
        layout.addSpacing(6)
        layout.addLayout(form)
        layout.addStretch(1)
        hint = QLabel("Drop an Easel or A1111 PNG here to reuse its settings")
        hint.setObjectName("hint")
        hint.setWordWrap(True)
        layout.addWidget(hint)
        layout.addWidget(self.generate)

    # --- reading and filling the form ---------------------------------------------------------

    def set_models(self, names: list[str]) -> None:
        current = self.model.currentText() or DEFAULT_MODEL
        self.model.blockSignals(True)
        self.model.clear()
        self.model.addItems(list(dict.fromkeys([DEFAULT_MODEL, *names])))
        self._select_model(current)
        self.model.blockSignals(False)

    def _select_model(self, name: str) -> None:
        if self.model.findText(name) < 0:
            self.model.addItem(name)  # keep a dropped image's model even if it's not installed
        self.model.setCurrentText(name)

    def params(self) -> GenerationParams:
        """The form as parameters (unvalidated beyond the seed box; the queue validates)."""
        seed_text = self.seed.text().strip()
        seed = int(seed_text) if seed_text else RANDOM_SEED
        if seed > MAX_SEED:
            raise InvalidParameters(f"seed must be between 0 and {MAX_SEED}")
        return GenerationParams(
            prompt=self.prompt.toPlainText(), negative_prompt=self.negative.toPlainText(),
            model=self.model.currentText() or DEFAULT_MODEL,
            scheduler=self.scheduler.currentText(), steps=self.steps.value(),
            cfg=round(self.cfg.value(), 2), width=self.width_box.value(),
            height=self.height_box.value(), seed=seed,
        )  # fmt: skip

    def image_count(self) -> int:
        return self.count.value()

    def set_params(self, p: GenerationParams) -> None:
        self.prompt.setPlainText(p.prompt)
        self.negative.setPlainText(p.negative_prompt)
        self._select_model(p.model)
        if p.scheduler in SCHEDULERS:
            self.scheduler.setCurrentText(p.scheduler)
        self.steps.setValue(p.steps)
        self.cfg.setValue(p.cfg)
        self.seed.setText("" if p.seed == RANDOM_SEED else str(p.seed))
        self.width_box.setValue(p.width)
        self.height_box.setValue(p.height)

    def _label_generate(self, count: int) -> None:
        self.generate.setText("Generate" if count == 1 else f"Generate {count} images")

    def roll_seed(self) -> None:
        self.seed.setText(str(random.randint(0, MAX_SEED)))

    def _preset_chosen(self, index: int) -> None:
        if 0 <= index < len(SIZE_PRESETS):
            _name, width, height = SIZE_PRESETS[index]
            for box, value in ((self.width_box, width), (self.height_box, height)):
                box.blockSignals(True)
                box.setValue(value)
                box.blockSignals(False)

    def _size_edited(self) -> None:
        size = (self.width_box.value(), self.height_box.value())
        match = [i for i, (_n, w, h) in enumerate(SIZE_PRESETS) if (w, h) == size]
        self.size_preset.blockSignals(True)
        self.size_preset.setCurrentIndex(match[0] if match else len(SIZE_PRESETS))
        self.size_preset.blockSignals(False)

    # --- dropping a PNG -----------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if _dropped_png(event.mimeData().urls()) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        path = _dropped_png(event.mimeData().urls())
        if path is not None:
            event.acceptProposedAction()
            self.load_png(path)

    def load_png(self, path: Path) -> bool:
        try:
            parsed = read_png_params(path)
        except NoParameters as error:
            self.message.emit(str(error))
            return False
        self.set_params(parsed.params)
        note = f"Settings from {path.name}"
        self.message.emit("; ".join([note, *parsed.warnings]))
        return True


def _dropped_png(urls: Sequence[QUrl]) -> Path | None:
    for url in urls:
        if url.isLocalFile() and url.toLocalFile().lower().endswith(".png"):
            return Path(url.toLocalFile())
    return None


def _spin(low: int, high: int, step: int = 1) -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setSingleStep(step)
    return box


def _row(*widgets: QWidget) -> QWidget:
    holder = QWidget()
    layout = QHBoxLayout(holder)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(6)
    for widget in widgets:
        layout.addWidget(widget, 0 if isinstance(widget, QLabel | QToolButton) else 1)
    return holder


def _title(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("sectionTitle")
    return label
