"""View > Workers: every worker process of every machine, with Drain and Stop for one.

The rows come from `app.engine.workers.roster` on the store thread (the window hands in
`load` and `ask`); the panel re-reads them every few seconds while it is open.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QFontDatabase, QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.workers.worker_states import WorkerRequest, WorkerSummary
from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate
from app.ui.presenters.workers import WorkerLine, worker_lines

REFRESH_MS = 3000
ADD_A_MACHINE = "python -m app worker --db URL --name NAME"  # a command: never translated
HEADERS = (
    QT_TRANSLATE_NOOP("WorkersPanel", "Machine"),
    QT_TRANSLATE_NOOP("WorkersPanel", "Device"),
    QT_TRANSLATE_NOOP("WorkersPanel", "Model loaded"),
    QT_TRANSLATE_NOOP("WorkersPanel", "Current job"),
    QT_TRANSLATE_NOOP("WorkersPanel", "Last heartbeat"),
    QT_TRANSLATE_NOOP("WorkersPanel", "Jobs done"),
    QT_TRANSLATE_NOOP("WorkersPanel", "State"),
)
_ID_ROLE = int(Qt.ItemDataRole.UserRole)

Show = Callable[[Sequence[WorkerSummary]], None]
LoadWorkers = Callable[[Show], None]
AskWorker = Callable[[str, WorkerRequest], None]


class WorkersPanel(QDialog):
    def __init__(self, load: LoadWorkers, ask: AskWorker, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Workers"))
        self._load = load
        self._ask = ask
        self._loading = False
        self.lines: list[WorkerLine] = []
        self.table = QTableWidget(0, len(HEADERS))
        self.table.setHorizontalHeaderLabels([translate("WorkersPanel", h) for h in HEADERS])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._menu)
        self.table.itemSelectionChanged.connect(self._enable_buttons)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.command = QLabel(ADD_A_MACHINE)
        self.command.setObjectName("command")
        self.command.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.command.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # A one-computer user needs no command line: it shows when asked for.
        self.command.hide()
        self.add_machine = QToolButton()
        self.add_machine.setText(self.tr("Add another computer…"))
        self.add_machine.setCheckable(True)
        self.add_machine.toggled.connect(self.command.setVisible)
        self.drain = QPushButton(self.tr("&Drain"))
        self.drain.setToolTip(self.tr("Finish the job in hand, then exit"))
        self.drain.clicked.connect(lambda: self.ask_selected(WorkerRequest.DRAIN))
        self.stop = QPushButton(self.tr("&Stop"))
        self.stop.setToolTip(
            self.tr("Pause the job in hand (it continues later from the same step), then exit")
        )
        self.stop.clicked.connect(lambda: self.ask_selected(WorkerRequest.STOP))
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        close.button(QDialogButtonBox.StandardButton.Close).setText(self.tr("Close"))
        buttons = QHBoxLayout()
        buttons.addWidget(self.drain)
        buttons.addWidget(self.stop)
        buttons.addStretch(1)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.note)
        layout.addWidget(self.add_machine, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.command)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.reload)
        self._enable_buttons()
        self.resize(860, 320)

    # --- reading ------------------------------------------------------------------------------

    def reload(self) -> None:
        if self._loading:
            return  # a slow store: one read at a time
        self._loading = True
        self._load(self.show_workers)

    def load_failed(self) -> None:
        self._loading = False

    def show_workers(self, workers: Sequence[WorkerSummary]) -> None:
        self._loading = False
        chosen = self.selected_id()
        self.lines = worker_lines(workers)
        self.table.setRowCount(len(self.lines))
        for row, line in enumerate(self.lines):
            cells = (line.machine, line.device, line.model, line.job, line.heard, line.done,
                     line.state)  # fmt: skip
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(_ID_ROLE, line.worker_id)
                item.setToolTip(line.worker_id)
                self.table.setItem(row, column, item)
            if line.worker_id == chosen:
                self.table.selectRow(row)
        if chosen is None and self.lines:
            self.table.selectRow(0)
        self.note.setText(
            self.tr("Every worker of every machine on this queue.")
            if self.lines
            else self.tr("No worker has started yet.")
        )  # fmt: skip
        self._enable_buttons()

    def selected_id(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        item = self.table.item(rows[0].row(), 0)
        return str(item.data(_ID_ROLE)) if item is not None else None

    def _selected_line(self) -> WorkerLine | None:
        chosen = self.selected_id()
        return next((line for line in self.lines if line.worker_id == chosen), None)

    # --- asking -------------------------------------------------------------------------------

    def ask_selected(self, request: WorkerRequest) -> None:
        line = self._selected_line()
        if line is None:
            return
        self._ask(line.worker_id, request)

    def _enable_buttons(self) -> None:
        line = self._selected_line()
        self.drain.setEnabled(line is not None and line.can_drain)
        self.stop.setEnabled(line is not None and line.can_stop)

    def _menu(self, at: QPoint) -> None:
        if self.table.itemAt(at) is None:
            return
        menu = QMenu(self)
        for button in (self.drain, self.stop):
            action = menu.addAction(button.text(), button.click)
            action.setEnabled(button.isEnabled())
        menu.popup(self.table.viewport().mapToGlobal(at))

    # --- refreshing while shown ---------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.reload()
        self.timer.start()

    def hideEvent(self, event: QHideEvent) -> None:
        self.timer.stop()
        super().hideEvent(event)
