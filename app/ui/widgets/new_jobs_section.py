"""Settings > New jobs: what the prompt panel starts with, and the defaults it can start from.

Its own section (not rows of the settings form), so other settings can be added around it.
The number fields are the prompt panel's own (`NumberEdit` with the same rules), so a
default is refused inline for exactly the reasons a job would be.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QComboBox, QGridLayout, QGroupBox, QLabel, QWidget

from app.engine.jobs.params import SCHEDULERS
from app.engine.settings import InvalidSettings, JobDefaults, NewJobValues
from app.ui.presenters import number_rules as rules
from app.ui.presenters.model_choices import ModelChoice, unknown_model
from app.ui.widgets.number_field import (
    FieldNote,
    NumberEdit,
    add_field_rows,
    field_row,
    number_in,
)
from app.ui.widgets.prompt_panel import add_model_item


class NewJobsSection(QGroupBox):
    def __init__(
        self,
        start_with: NewJobValues,
        defaults: JobDefaults,
        models: Sequence[ModelChoice] = (),
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setTitle(self.tr("New jobs"))
        self.start_with = QComboBox()
        self.start_with.addItem(self.tr("the values I used last"), NewJobValues.LAST_USED.value)
        self.start_with.addItem(self.tr("these defaults"), NewJobValues.DEFAULTS.value)
        self.start_with.setCurrentIndex(self.start_with.findData(start_with.value))
        self.start_with.setToolTip(
            self.tr("What the prompt panel shows when Easel starts; "
                    "“Reset to defaults” there always uses these")
        )  # fmt: skip
        self.model = QComboBox()
        self.model.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        for choice in models:
            add_model_item(self.model, choice)
        if self.model.findData(defaults.model) < 0:  # not installed (yet): keep it offered
            add_model_item(self.model, unknown_model(defaults.model))
        self.model.setCurrentIndex(self.model.findData(defaults.model))
        self.sampler = QComboBox()
        self.sampler.addItems(SCHEDULERS)
        self.sampler.setCurrentText(defaults.sampler)
        self.steps = NumberEdit(rules.STEPS)
        self.cfg = NumberEdit(rules.CFG, step=0.5)
        self.width_box = NumberEdit(rules.WIDTH)
        self.height_box = NumberEdit(rules.HEIGHT)
        self.images = NumberEdit(rules.IMAGES)
        for edit, value in ((self.steps, defaults.steps), (self.cfg, defaults.cfg),
                            (self.width_box, defaults.width), (self.height_box, defaults.height),
                            (self.images, defaults.images)):  # fmt: skip
            edit.setValue(value)
        self._lay_out()

    def _lay_out(self) -> None:
        rows: list[tuple[str, QWidget, QWidget | None]] = [
            (self.tr("Start with"), self.start_with, None),
            (self.tr("Model"), self.model, None),
            (self.tr("Sampler"), self.sampler, None),
            (self.tr("Steps"), self.steps, FieldNote(self.steps)),
            ("CFG", self.cfg, FieldNote(self.cfg)),
            (self.tr("Size"), field_row(self.width_box, QLabel("×"), self.height_box),
             FieldNote(self.width_box, self.height_box)),
            (self.tr("Images"), self.images, FieldNote(self.images)),
        ]  # fmt: skip
        add_field_rows(QGridLayout(self), rows)

    def chosen_start(self) -> NewJobValues:
        return NewJobValues(self.start_with.currentData())

    def numbers(self) -> tuple[NumberEdit, ...]:
        return (self.steps, self.cfg, self.width_box, self.height_box, self.images)

    def defaults(self) -> JobDefaults:
        """The defaults as shown, or InvalidSettings naming every number that cannot be used."""
        problems = [r.problem for r in (edit.reading() for edit in self.numbers()) if r.problem]
        if problems:
            raise InvalidSettings("; ".join(problems))
        return JobDefaults(
            model=str(self.model.currentData()), sampler=self.sampler.currentText(),
            steps=int(number_in(self.steps)), cfg=float(number_in(self.cfg)),
            width=int(number_in(self.width_box)), height=int(number_in(self.height_box)),
            images=int(number_in(self.images)),
        )  # fmt: skip

    def focus_first_problem(self) -> None:
        for edit in self.numbers():
            if not edit.reading().ok:
                edit.setFocus()
                edit.selectAll()
                return
