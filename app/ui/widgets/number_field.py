"""Numeric inputs that never lie: what is typed stays on screen, and a bad value says so.

A spin box drops keys that would leave its range (999 became 99) and reverts an
unfinished value when the field loses focus (0 became 20), while `value()` keeps an older
number than the one shown. These fields keep every key, check the text against the
field's rule as it changes, and show the range or the problem right next to the field.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent, QWheelEvent
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QLineEdit, QToolButton, QWidget

from app.engine.jobs.params import InvalidParameters
from app.ui.presenters.i18n import translate
from app.ui.presenters.number_rules import NumberRule, Reading, format_number

PAGE = 10  # Page Up / Page Down move this many steps
STEP_KEYS = {Qt.Key.Key_Up: 1, Qt.Key.Key_Down: -1, Qt.Key.Key_PageUp: PAGE,
             Qt.Key.Key_PageDown: -PAGE}  # fmt: skip


class NumberEdit(QLineEdit):
    """A number field read through its rule; Up/Down, Page Up/Down and the wheel step it."""

    def __init__(self, rule: NumberRule, step: float = 1, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rule = rule
        self.step = max(step, rule.multiple)
        self.setAccessibleName(rule.label)
        self.setAlignment(Qt.AlignmentFlag.AlignRight)
        if rule.blank:
            self.setPlaceholderText(rule.blank_text)
        self.textChanged.connect(self._show_state)

    def reading(self) -> Reading:
        return self.rule.read(self.text())

    def setValue(self, value: float) -> None:
        self.setText(format_number(value))

    def step_by(self, steps: int) -> None:
        """Step from the number shown (or the nearest bound), staying inside the range."""
        current = self.rule.parse(self.text())
        base = self.rule.low if current is None else current
        self.setValue(self.rule.clamp(base + steps * self.step))

    def keyPressEvent(self, event: QKeyEvent) -> None:
        steps = STEP_KEYS.get(Qt.Key(event.key()))
        if steps is None:
            super().keyPressEvent(event)
            return
        self.step_by(steps)

    def wheelEvent(self, event: QWheelEvent) -> None:
        if not self.hasFocus():  # scrolling the panel must not change values in passing
            event.ignore()
            return
        notches = event.angleDelta().y() // 120
        if notches:
            self.step_by(notches)
        event.accept()

    def _show_state(self) -> None:
        reading = self.reading()
        _set_invalid(self, not reading.ok)
        self.setToolTip(reading.problem or f"{self.rule.label}: {self.rule.range_text()}")
        self.setAccessibleDescription(reading.problem or self.rule.range_text())


class FieldNote(QLabel):
    """The small text next to number fields: their range, or in red what is wrong."""

    def __init__(self, *edits: NumberEdit, quiet: bool = False) -> None:
        super().__init__()
        self.setObjectName("fieldNote")
        self._edits = edits
        self._quiet = quiet  # say nothing while the number is fine (its tooltip has the range)
        for edit in edits:
            edit.textChanged.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        problems = [r for r in (edit.reading() for edit in self._edits) if not r.ok]
        _set_invalid(self, bool(problems))
        fine = "" if self._quiet else self._edits[0].rule.range_text()
        self.setText(problems[0].short if problems else fine)
        self.setToolTip(problems[0].problem or "" if problems else "")


def _set_invalid(widget: QWidget, invalid: bool) -> None:
    """Restyle through the `invalid` property (the style sheet colours it red)."""
    if widget.property("invalid") == invalid:
        return
    widget.setProperty("invalid", invalid)
    widget.style().unpolish(widget)
    widget.style().polish(widget)


def number_in(edit: NumberEdit) -> int | float:
    """The number in a field already read as usable (see `NumberEdit.reading`)."""
    value = edit.reading().value
    if value is None:  # only a field that may be blank reads as None; these may not
        raise InvalidParameters(
            translate("NumberRule", "{name} is empty").format(name=edit.rule.label)
        )
    return value


def add_field_rows(
    grid: QGridLayout, rows: list[tuple[str, QWidget, QWidget | None]]
) -> list[QLabel]:
    """Label | field | its note (range or problem), one line each; returns the labels."""
    grid.setColumnStretch(1, 1)
    captions = []
    for line, (label, field, note) in enumerate(rows):
        caption = QLabel(label)
        captions.append(caption)
        grid.addWidget(caption, line, 0)
        if not label:  # its row is none while its field is hidden (was a line's gap)
            caption.hide()
        grid.addWidget(field, line, 1, 1, 1 if note else 2)
        if note is not None:
            grid.addWidget(note, line, 2)
    return captions


def field_row(*widgets: QWidget) -> QWidget:
    """Several widgets in one field's place (width × height, the seed and its dice)."""
    holder = QWidget()
    layout = QHBoxLayout(holder)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(6)
    for widget in widgets:
        layout.addWidget(widget, 0 if isinstance(widget, QLabel | QToolButton) else 1)
    return holder
