"""The job list with its status filter and the actions on the selected jobs."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QItemSelectionModel, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.jobs.states import JobStatus
from app.ui.itemmodels.delegates import (
    ProgressDelegate,
    PromptDelegate,
    StatusDelegate,
    ThumbnailDelegate,
)
from app.ui.itemmodels.job_list_model import ROW_ROLE, Col
from app.ui.presenters import shortcuts
from app.ui.presenters.actions import (
    EVENTS,
    FOLLOW_UPS,
    FOR_THE_WINDOW,
    ROW_BUTTONS,
    SHOWN_WHEN_APPLICABLE,
    Action,
    applicable,
)
from app.ui.presenters.rows import FILTERS, JobRow, ListFilter, filter_label
from app.ui.viewmodels.jobs_viewmodel import JobsViewModel
from app.ui.widgets.empty_views import EmptyTableView
from app.ui.widgets.flow_layout import FlowLayout

ROW_HEIGHT = 58  # two lines of prompt and the detail line under them
COLUMN_WIDTHS = {
    Col.IMAGE: 48,
    Col.STATUS: 112,
    Col.PROGRESS: 150,
    Col.ATTEMPT: 62,
    Col.CREATED: 74,
    Col.DURATION: 64,
}
# Shown from the header's menu; until then attempts, creation time and duration are in each
# row's tooltip and the timeline (a running job's time left is in its progress), and the
# prompt has their room.
HIDDEN_AT_FIRST = (Col.ATTEMPT, Col.CREATED, Col.DURATION)


SEARCH_DEBOUNCE_MS = 250  # a search runs when typing pauses this long, not on every key


class JobsPanel(QWidget):
    selection_changed = Signal(object)  # the current JobRow or None
    open_requested = Signal(object)  # the JobRow whose image to open (Enter)
    follow_up = Signal(object, object)  # (Action, [JobRow]): one of FOR_THE_WINDOW
    undo_requested = Signal()  # Undo on jobs being cancelled: the window takes the cancel back

    def __init__(self, vm: JobsViewModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.vm = vm
        self.filters = self._filter_buttons()
        self.buttons = {action: self._action_button(action) for action in ROW_BUTTONS}
        self.table = self._table()
        self._build_search()
        # Both button rows wrap in a narrow window instead of setting its minimum width.
        self.filter_bar = QWidget()
        top = FlowLayout(self.filter_bar, spacing=4)
        for button in self.filters.buttons():
            top.addWidget(button)
        self.action_bar = QWidget()
        actions = FlowLayout(self.action_bar, spacing=4)
        for button in self.buttons.values():
            actions.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.filter_bar)
        layout.addWidget(self.search)
        layout.addWidget(self.search_note)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.action_bar)
        vm.counts_changed.connect(self._show_counts)
        # Progress changes rows many times a second; re-check the buttons once per burst.
        self._actions_due = QTimer(self)
        self._actions_due.setSingleShot(True)
        self._actions_due.setInterval(30)
        self._actions_due.timeout.connect(self._update_actions)
        for signal in (vm.jobs.dataChanged, vm.jobs.modelReset, vm.jobs.rowsRemoved):
            signal.connect(self._actions_due.start)
        # Rows scrolled into view may be stale (only visible ones are re-read): refresh.
        vm.visible_rows = self.visible_rows
        self._scrolled = QTimer(self)
        self._scrolled.setSingleShot(True)
        self._scrolled.setInterval(150)
        self._scrolled.timeout.connect(vm.refresh)
        self.table.verticalScrollBar().valueChanged.connect(self._scrolled.start)
        self.menu: QMenu | None = None  # the open actions menu, if any
        self._bind_keys()
        self._update_actions()

    def _bind_keys(self) -> None:
        # Tab leaves the list (instead of walking its cells), so the keyboard gets out again.
        self.table.setTabKeyNavigation(False)
        bindings = (
            (shortcuts.CANCEL, lambda: self.trigger(Action.CANCEL)),
            (shortcuts.PAUSE_OR_RESUME, self.pause_or_resume),
            (shortcuts.OPEN_IMAGE, self._open_current),
            (shortcuts.MENU, self.open_menu),
            (shortcuts.MOVE_UP, lambda: self.trigger(Action.UP)),
            (shortcuts.MOVE_DOWN, lambda: self.trigger(Action.DOWN)),
        )
        for shortcut, slot in bindings:
            for keys in shortcut.keys:
                key = QShortcut(QKeySequence(keys), self.table, slot)
                key.setContext(Qt.ShortcutContext.WidgetShortcut)

    # --- building -----------------------------------------------------------------------------

    def _build_search(self) -> None:
        """Type-ahead over the history: the store is asked once typing pauses, on its thread."""
        self.search = QLineEdit()
        self.search.setObjectName("search")
        self.search.setPlaceholderText(self.tr("Search prompts (Ctrl+F): red circle, -blue, cat*"))
        self.search.setClearButtonEnabled(True)
        self.search_note = QLabel()
        self.search_note.setObjectName("fieldNote")
        self.search_note.setProperty("invalid", True)  # shown only to say what is wrong
        self.search_note.setWordWrap(True)
        self.search_note.hide()
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DEBOUNCE_MS)
        self._search_timer.timeout.connect(lambda: self.vm.set_search(self.search.text()))
        self.search.textChanged.connect(self._search_timer.start)
        self.search.returnPressed.connect(self._search_now)
        self.vm.search_checked.connect(self._show_search_problem)

    def _search_now(self) -> None:
        self._search_timer.stop()
        self.vm.set_search(self.search.text())
        self.table.setFocus()

    def focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    def _show_search_problem(self, problem: str) -> None:
        self.search_note.setText(problem)
        self.search_note.setVisible(bool(problem))

    def _filter_buttons(self) -> QButtonGroup:
        group = QButtonGroup(self)
        group.setExclusive(True)
        for name in FILTERS:
            button = QPushButton(filter_label(name))
            button.setCheckable(True)
            button.setObjectName("filter")
            button.setProperty("filter", name.value)
            button.setChecked(name == self.vm.filter_name)
            group.addButton(button)
        group.buttonClicked.connect(lambda b: self.vm.set_filter(ListFilter(b.property("filter"))))
        return group

    def _action_button(self, action: Action) -> QPushButton:
        button = QPushButton(action.button_text)
        button.setToolTip(action.tip)
        button.setObjectName("action")
        button.clicked.connect(lambda: self.trigger(action))
        return button

    def _table(self) -> EmptyTableView:
        table = EmptyTableView(self.tr("No jobs here yet. Type a prompt and press Ctrl+Enter."))
        table.setModel(self.vm.jobs)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        table.setShowGrid(False)
        # Queued jobs can be dragged onto another queued job to run just before it.
        table.setDragEnabled(True)
        table.setAcceptDrops(True)
        table.setDropIndicatorShown(True)
        table.setDragDropMode(QAbstractItemView.DragDropMode.DragDrop)
        table.setDefaultDropAction(Qt.DropAction.MoveAction)
        table.setWordWrap(False)
        table.setAlternatingRowColors(True)
        table.verticalHeader().hide()
        table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        table.verticalHeader().setDefaultSectionSize(ROW_HEIGHT)
        table.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        table.setItemDelegateForColumn(Col.IMAGE, ThumbnailDelegate(36, table))
        table.setItemDelegateForColumn(Col.PROMPT, PromptDelegate(table))
        table.setItemDelegateForColumn(Col.STATUS, StatusDelegate(table))
        table.setItemDelegateForColumn(Col.PROGRESS, ProgressDelegate(table))
        header = table.horizontalHeader()
        header.setHighlightSections(False)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        for col, width in COLUMN_WIDTHS.items():
            header.resizeSection(col, width)
        # Every column but the prompt (which takes what is left) is dragged to its width;
        # the widths and the columns shown are remembered (`header_state`).
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(Col.PROMPT, QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(40)
        for col in HIDDEN_AT_FIRST:
            header.setSectionHidden(col, True)
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(self._header_menu)
        table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        table.customContextMenuRequested.connect(self._context_menu)
        table.selectionModel().selectionChanged.connect(self._selection_changed)
        return table

    def _header_menu(self, point: QPoint) -> None:
        """Right-click on the column titles: which columns show."""
        header = self.table.horizontalHeader()
        menu = QMenu(self)
        for col in Col:
            if col in (Col.IMAGE, Col.PROMPT):
                continue
            item = QAction(str(self.vm.jobs.headerData(col, Qt.Orientation.Horizontal, 0)), menu)
            item.setCheckable(True)
            item.setChecked(not header.isSectionHidden(col))
            item.toggled.connect(lambda on, c=col: header.setSectionHidden(c, not on))
            menu.addAction(item)
        menu.popup(header.mapToGlobal(point))
        self.header_menu = menu

    def header_state(self) -> QByteArray:
        return self.table.horizontalHeader().saveState()

    def restore_header(self, state: QByteArray | None) -> None:
        if state is not None and not state.isEmpty():
            header = self.table.horizontalHeader()
            header.restoreState(state)
            header.setSectionResizeMode(Col.PROMPT, QHeaderView.ResizeMode.Stretch)

    # --- selection and actions ----------------------------------------------------------------

    def visible_rows(self) -> tuple[int, int]:
        viewport = self.table.viewport()
        first = self.table.rowAt(0)
        last = self.table.rowAt(viewport.height() - 1)
        count = self.vm.jobs.rowCount()
        return (max(0, first), last if last >= 0 else count - 1)

    def selected_rows(self) -> list[JobRow]:
        rows = self.table.selectionModel().selectedRows()
        return [
            row for index in sorted(rows, key=lambda i: i.row()) if (row := index.data(ROW_ROLE))
        ]

    def current_row(self) -> JobRow | None:
        rows = self.selected_rows()
        return rows[0] if len(rows) == 1 else (rows[0] if rows else None)

    def select_jobs(self, job_ids: tuple[int, ...] | list[int]) -> None:
        selection = self.table.selectionModel()
        selection.clearSelection()
        flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
        first = None
        for job_id in job_ids:
            row = self.vm.jobs.row_of(job_id)
            if row is not None:
                selection.select(self.vm.jobs.index(row, 0), flags)
                first = row if first is None else min(first, row)
        if first is not None:
            # The arrow keys move on from here, not from wherever the cursor was before.
            current = self.vm.jobs.index(first, 0)
            selection.setCurrentIndex(current, QItemSelectionModel.SelectionFlag.NoUpdate)
            self.table.scrollTo(current)

    def trigger(self, action: Action) -> None:
        targets = applicable(action, self.selected_rows())
        if not targets:
            return
        if action in FOR_THE_WINDOW:
            rows = [row for row in self.selected_rows() if row.id in targets.job_ids]
            self.follow_up.emit(action, rows)
        elif action is Action.UNDO:
            self.undo_requested.emit()
        elif action is Action.CANCEL:
            self.vm.cancel(targets.job_ids)
        elif action is Action.RERUN:
            self.vm.rerun(targets.job_ids)
        elif action is Action.STAR:
            rows = self.selected_rows()
            self.vm.star(targets.job_ids, on=not all(row.starred for row in rows))
        elif action in (Action.TOP, Action.BOTTOM):
            self.vm.move_to(targets.job_ids, top=action is Action.TOP)
        elif action in (Action.UP, Action.DOWN):
            self.move_one_place(targets.job_ids, up=action is Action.UP)
        else:
            self.vm.request(EVENTS[action], targets.job_ids)

    def move_one_place(self, job_ids: tuple[int, ...], *, up: bool) -> None:
        """One place up or down the queue order the list shows (the queued rows, in order)."""
        line = [r.id for r in self.vm.jobs.rows() if r.status is JobStatus.PENDING]
        places = sorted(line.index(i) for i in job_ids if i in line)
        if not places:
            return
        moved = tuple(line[p] for p in places)
        if up and places[0] > 0:
            self.vm.move_before(moved, line[places[0] - 1])
        elif not up and places[-1] + 2 < len(line):
            self.vm.move_before(moved, line[places[-1] + 2])
        elif not up and places[-1] + 1 < len(line):
            self.vm.move_to(moved, top=False)

    def pause_or_resume(self) -> None:
        """Space: pause what can be paused in the selection, else resume what can be."""
        rows = self.selected_rows()
        self.trigger(Action.PAUSE if applicable(Action.PAUSE, rows) else Action.RESUME)

    def _open_current(self) -> None:
        row = self.current_row()
        if row is not None:
            self.open_requested.emit(row)

    def open_menu(self) -> None:
        """The actions menu at the current row, from the keyboard (Shift+F10, Menu)."""
        index = self.table.currentIndex()
        if not index.isValid() or not self.table.selectionModel().isRowSelected(index.row()):
            rows = self.table.selectionModel().selectedRows()
            index = min(rows, key=lambda i: i.row()) if rows else index
        self._context_menu(self.table.visualRect(index).center())

    def _selection_changed(self) -> None:
        self._update_actions()
        self.selection_changed.emit(self.current_row())

    def _update_actions(self, *_signal_args: object) -> None:
        rows = self.selected_rows()
        for action, button in self.buttons.items():
            button.setEnabled(bool(applicable(action, rows)))
            if action in SHOWN_WHEN_APPLICABLE:
                button.setVisible(button.isEnabled())

    def _context_menu(self, point: QPoint) -> None:
        rows = self.selected_rows()
        if not rows:
            return
        menu = QMenu(self)
        for action in Action:
            if action in (FOLLOW_UPS[0], Action.SHOW_IN_FOLDER):
                menu.addSeparator()
            label = action.label
            if action is Action.STAR and all(row.starred for row in rows):
                label = self.tr("Remove the star")
            item = QAction(label, menu)
            item.setToolTip(action.tip)
            item.setEnabled(bool(applicable(action, rows)))
            item.triggered.connect(lambda _=False, a=action: self.trigger(a))
            menu.addAction(item)
        menu.popup(self.table.viewport().mapToGlobal(point))
        enabled = [a for a in menu.actions() if a.isEnabled()]
        if enabled:  # arrows and Enter work at once
            menu.setActiveAction(enabled[0])
        self.menu = menu

    def _show_counts(self, counts: dict[JobStatus, int]) -> None:
        for button in self.filters.buttons():
            name = ListFilter(button.property("filter"))
            if name is ListFilter.STARRED:
                continue  # the counts are per status; favourites are not one
            statuses = FILTERS[name]
            n = (
                sum(counts.values())
                if statuses is None
                else sum(counts.get(s, 0) for s in statuses)
            )
            button.setText(f"{filter_label(name)}  {n}")
