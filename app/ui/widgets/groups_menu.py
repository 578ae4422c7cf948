"""The Groups menu: the X/Y/Z plot builder, and pause, resume, cancel or retry of a whole
group (a batch, a grid) from any of its jobs selected in the list.

Hooked into the window by one call (`add_groups_menu`); everything it asks of the store goes
through `presenters.group_requests` on the window's database thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenuBar,
    QVBoxLayout,
    QWidget,
)

from app.engine.jobs.grid_spec import AXIS_NAMES, LABELS
from app.engine.jobs.params import GenerationParams, InvalidParameters
from app.engine.jobs.states import GroupAction
from app.ui.presenters.group_requests import act_on_groups, cells_count, check_grid, queue_grid
from app.ui.presenters.i18n import translate
from app.ui.presenters.queue_service import Outcome, QueueService
from app.ui.presenters.rows import JobRow

EXAMPLES = {"x": ("steps", "4, 8, 12"), "y": ("cfg", "3, 7"), "z": ("", "")}


def add_groups_menu(
    bar: QMenuBar,
    window: QWidget,
    service: QueueService,
    run: Callable[[Callable[[], Outcome], Callable[[Outcome], None]], None],
    selected: Callable[[], Sequence[JobRow]],
    form: Callable[[], GenerationParams],
    refresh: Callable[[], None],
) -> GroupsMenu:
    """Add the Groups menu. `run(call, done)`: `call` on the database thread, `done` with
    its outcome on the GUI thread; `selected`: the rows selected in the job list; `form`:
    the prompt form's settings (the grid's base)."""
    return GroupsMenu(bar, window, service, run, selected, form, refresh)


class GroupsMenu:
    def __init__(
        self,
        bar: QMenuBar,
        window: QWidget,
        service: QueueService,
        run: Callable[[Callable[[], Outcome], Callable[[Outcome], None]], None],
        selected: Callable[[], Sequence[JobRow]],
        form: Callable[[], GenerationParams],
        refresh: Callable[[], None],
    ) -> None:
        self.window = window
        self.service = service
        self.run = run
        self.selected = selected
        self.form = form
        self.refresh = refresh
        self.menu = bar.addMenu(translate("Groups", "&Groups"))
        self.menu.addAction(translate("Groups", "X/Y/Z &plot…"), self.open_grid_builder)
        self.menu.addSeparator()
        words = {
            GroupAction.PAUSE: translate("Groups", "&Pause the selected job's group"),
            GroupAction.RESUME: translate("Groups", "&Resume the selected job's group"),
            GroupAction.CANCEL: translate("Groups", "&Cancel the selected job's group"),
            GroupAction.RETRY: translate("Groups", "Re&try the selected job's group"),
        }
        for action, text in words.items():
            self.menu.addAction(text, partial(self.act, action))
        self.dialog: GridBuilder | None = None

    def act(self, action: GroupAction) -> None:
        groups = [row.group_id for row in self.selected() if row.group_id is not None]
        if not groups:
            self._error(translate("Groups", "Select a job of a batch or grid first"))
            return
        service = self.service
        self.run(lambda: act_on_groups(service, groups, action), self._done)

    def open_grid_builder(self) -> None:
        try:
            base = self.form()
        except InvalidParameters as error:
            self._error(str(error))
            return
        self.dialog = GridBuilder(base, self.window)
        self.dialog.accepted.connect(self._queue_grid)
        self.dialog.open()

    def _queue_grid(self) -> None:
        dialog = self.dialog
        if dialog is None:
            return
        params, axes, service = dialog.params(), dialog.axes(), self.service
        self.run(lambda: queue_grid(service, params, axes), self._done)

    def _done(self, outcome: Outcome) -> None:
        for message in outcome.errors:
            self._error(message)
        self.refresh()

    def _error(self, text: str) -> None:
        show = getattr(self.window, "show_error", None)
        if show is not None:
            show(text)


class GridBuilder(QDialog):
    """Up to three axes over the form's settings; each cell is an ordinary job, and one
    more job composes the labelled grid once they are all settled."""

    def __init__(self, base: GenerationParams, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(translate("Groups", "X/Y/Z plot"))
        self.base = base
        self.prompt = QLineEdit(base.prompt)
        self.rows: dict[str, tuple[QComboBox, QLineEdit]] = {}
        form = QFormLayout()
        form.addRow(translate("Groups", "Prompt"), self.prompt)
        for letter in AXIS_NAMES:
            kind = QComboBox()
            kind.addItem(translate("Groups", "(none)"), "")
            for name, label in LABELS.items():
                kind.addItem(label, name)
            values = QLineEdit()
            values.setPlaceholderText(translate("Groups", "values, separated by commas"))
            name, example = EXAMPLES[letter]
            kind.setCurrentIndex(max(0, kind.findData(name)))
            values.setText(example)
            row = QHBoxLayout()
            row.addWidget(kind)
            row.addWidget(values, 1)
            form.addRow(translate("Groups", "{axis} axis").format(axis=letter.upper()), row)
            self.rows[letter] = (kind, values)
            kind.currentIndexChanged.connect(self._update)
            values.textChanged.connect(self._update)
        self.prompt.textChanged.connect(self._update)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText(
            translate("Groups", "Queue the grid")
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.summary)
        layout.addWidget(self.buttons)
        self.resize(560, self.sizeHint().height())
        self._update()

    def axes(self) -> list[tuple[str, str]]:
        out = []
        for letter, (kind, values) in self.rows.items():
            name = kind.currentData()
            if name:
                out.append((letter, f"{name}={values.text()}"))
        return out

    def params(self) -> GenerationParams:
        return GenerationParams(**{**self.base.to_dict(), "prompt": self.prompt.text()})

    def _update(self) -> None:
        count, why = cells_count(self.axes())
        problem = why or (check_grid(self.params(), self.axes()) if count else "")
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setEnabled(count > 0 and not problem)
        if problem:
            self.summary.setText(problem)
        elif count:
            self.summary.setText(
                translate("Groups", "{cells} cell jobs and one grid job").format(cells=count)
            )
        else:
            self.summary.setText(translate("Groups", "Choose an X axis and its values"))
