"""How many variations, and how far from the image: a small window-modal question.

The strength is img2img's: how much of the picture is redrawn. At the engine's 0.3 the
four variations of a small image came out nearly identical (issue 28.5): 0.3 of 20 steps
is 6 steps from the parent's own latents. The window asks, starting at 0.5.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.ui.presenters.i18n import translate

MAX_VARIATIONS = 16
DEFAULT_VARIATIONS = 4  # as the engine's `submit_variations`
WINDOW_STRENGTH = 0.5  # clearly different, still the same picture


class VariationsDialog(QDialog):
    chosen = Signal(int, float)  # (count, strength)

    def __init__(self, job_id: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(translate("MainWindow", "Variations of job {id}").format(id=job_id))
        self.count = QSpinBox()
        self.count.setRange(1, MAX_VARIATIONS)
        self.count.setValue(DEFAULT_VARIATIONS)
        self.strength = QDoubleSpinBox()
        self.strength.setRange(0.05, 1.0)
        self.strength.setSingleStep(0.05)
        self.strength.setDecimals(2)
        self.strength.setValue(WINDOW_STRENGTH)
        hint = QLabel(
            translate(
                "MainWindow", "Strength: how much is redrawn. 0.3 stays close, 0.6 varies clearly."
            )
        )
        hint.setObjectName("hint")
        hint.setWordWrap(True)
        form = QFormLayout()
        question = translate("MainWindow", "How many images close to job {id}?")
        form.addRow(question.format(id=job_id), self.count)
        form.addRow(translate("MainWindow", "Strength"), self.strength)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText(translate("MainWindow", "Queue"))
        buttons.button(QDialogButtonBox.StandardButton.Cancel).setText(
            translate("MainWindow", "Cancel")
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(hint)
        layout.addWidget(buttons)
        self.accepted.connect(lambda: self.chosen.emit(self.count.value(), self.strength.value()))
        self.count.setFocus()
