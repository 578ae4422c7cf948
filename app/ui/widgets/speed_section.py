"""The prompt panel's speed controls: step caching (Speed: off, fast, fastest) in sight, and
under "Advanced" the cache's threshold, compiling the model and the attention kernel.

What each setting costs is said where it is chosen: step caching softens detail a little
(fastest more), compiling takes a while once per model and worker. The attention kernel
is each worker's choice (PyTorch SDPA, FlashAttention where installed on an NVIDIA GPU):
shown, not set.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.generation.files.registry import step_cache_labels
from app.engine.jobs.params import MAX_SPEED_THRESHOLD, SPEED_OFF, GenerationParams

SPEEDS = ("off", "fast", "fastest")


class SpeedSection(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.speed = QComboBox()
        labels = {
            "off": self.tr("Off (exact)"),
            "fast": self.tr("Fast (step caching, slightly softer)"),
            "fastest": self.tr("Fastest (step caching, softer)"),
        }
        for speed in SPEEDS:
            self.speed.addItem(labels[speed], speed)
        self.speed.setToolTip(
            self.tr("Skip the model's work on steps that change little (First Block Cache): "
                    "about twice as fast at a small cost in detail. {families} models only")
            .format(families=" / ".join(step_cache_labels()))  # names only: any language
        )  # fmt: skip
        self.speed.currentIndexChanged.connect(self._speed_changed)
        self.show_advanced = QToolButton()
        self.show_advanced.setText(self.tr("Advanced ▸"))
        self.show_advanced.setCheckable(True)
        self.show_advanced.toggled.connect(self._toggle_advanced)
        self.threshold = QDoubleSpinBox()
        self.threshold.setRange(0.0, MAX_SPEED_THRESHOLD)
        self.threshold.setSingleStep(0.01)
        self.threshold.setDecimals(2)
        self.threshold.setSpecialValueText(self.tr("the speed's own"))
        self.threshold.setToolTip(
            self.tr("Higher skips more steps and softens more (fast: 0.08, fastest: 0.12)")
        )
        self.compile = QCheckBox(self.tr("Compile the model"))
        self.compile.setToolTip(
            self.tr("Faster steps after compiling the model once per worker (that first "
                    "job waits for it; kept for later starts). Falls back to running "
                    "uncompiled if compiling fails")
        )  # fmt: skip
        self.attention = QLabel(
            self.tr("PyTorch SDPA; FlashAttention on NVIDIA GPUs where installed (each "
                    "worker chooses)")
        )  # fmt: skip
        self.attention.setObjectName("fieldNote")
        self.attention.setWordWrap(True)
        self._lay_out()
        self._speed_changed()

    def _lay_out(self) -> None:
        self.advanced = QWidget()
        form = QFormLayout(self.advanced)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow(self.tr("Cache threshold"), self.threshold)
        form.addRow("", self.compile)
        form.addRow(self.tr("Attention"), self.attention)
        self.advanced.hide()
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel(self.tr("Speed")))
        row.addWidget(self.speed, 1)
        row.addWidget(self.show_advanced)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.advanced)

    def _toggle_advanced(self, on: bool) -> None:
        self.advanced.setVisible(on)
        self.show_advanced.setText(self.tr("Advanced ▾") if on else self.tr("Advanced ▸"))

    def _speed_changed(self) -> None:
        self.threshold.setEnabled(self.chosen_speed() != SPEED_OFF)

    def chosen_speed(self) -> str:
        return str(self.speed.currentData() or SPEED_OFF)

    def applied(self, params: GenerationParams) -> GenerationParams:
        """`params` with the speed, threshold and compile shown here."""
        speed = self.chosen_speed()
        threshold = self.threshold.value() if speed != SPEED_OFF else 0.0
        return replace(params, speed=speed, speed_threshold=round(threshold, 2),
                       compile=self.compile.isChecked())  # fmt: skip

    def show_params(self, params: GenerationParams) -> None:
        """Show a job's (or a dropped PNG's) speed settings."""
        index = self.speed.findData(params.speed)
        self.speed.setCurrentIndex(max(0, index))
        self.threshold.setValue(params.speed_threshold)
        self.compile.setChecked(params.compile)

    def remembered(self) -> dict[str, str]:
        return {"speed": self.chosen_speed(), "speed_threshold": f"{self.threshold.value():g}",
                "compile": "1" if self.compile.isChecked() else ""}  # fmt: skip

    def recall(self, saved: dict[str, str]) -> None:
        if saved.get("speed") in SPEEDS:
            self.speed.setCurrentIndex(self.speed.findData(saved["speed"]))
        with contextlib.suppress(ValueError):  # an edited window.ini: the speed's own
            self.threshold.setValue(float(saved.get("speed_threshold", "") or 0))
        self.compile.setChecked(bool(saved.get("compile")))
