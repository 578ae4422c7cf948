"""What the main window remembers between runs in its QSettings (`ui_settings`): size and
splitters, the pixel view, the form as last used, and the jobs the quit question paused.

The keys are named here once, so a key read at launch is the key written at quit.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QByteArray, QSettings, QSize
from PySide6.QtWidgets import QMainWindow, QSplitter

from app.engine import paths

UI_SETTINGS_FILE = "window.ini"
RESUME_ON_LAUNCH = "jobs/resume_on_launch"
GEOMETRY = "window/geometry"
SPLITTER = "splitter/{name}"  # one per splitter, by its object name
JOB_COLUMNS = "jobs/header"  # the job list's column widths and which columns show
PIXELS = "view/pixels"  # the image shown pixel for pixel, not fitted
FORM_GROUP = "form"  # the prompt settings offered again at the next launch
PAUSED_AT_QUIT = "jobs/paused_at_quit"  # ids the quit question promised to continue

DEFAULT_SIZE = (1480, 900)
PROMPT_WIDTH = 300
# The job list needs room for its columns; the image takes what is left.
MIN_RIGHT_WIDTH, RIGHT_SHARE = 560, 0.42


def ui_settings() -> QSettings:
    """Window state lives in the data folder (not the registry), so EASEL_HOME isolates it."""
    return QSettings(str(paths.data_dir() / UI_SETTINGS_FILE), QSettings.Format.IniFormat)


def resume_on_launch(store: QSettings) -> bool:
    """Whether jobs paused at quit (or found paused by recovery) resume when Easel starts."""
    return bool(store.value(RESUME_ON_LAUNCH, False, type=bool))


def save_resume_on_launch(store: QSettings, on: bool) -> None:
    store.setValue(RESUME_ON_LAUNCH, on)


def restore_geometry(window: QMainWindow, main: QSplitter, store: QSettings) -> None:
    """The size and splitters the window had at its last quit (a first run: defaults)."""
    geometry = store.value(GEOMETRY)
    if geometry is not None:
        window.restoreGeometry(geometry)
    else:
        window.resize(first_size(window))
    width = window.width()
    right = max(min(MIN_RIGHT_WIDTH, width // 2), int(width * RIGHT_SHARE))
    main.setSizes([PROMPT_WIDTH, width - PROMPT_WIDTH - right, right])
    for splitter in window.findChildren(QSplitter):
        state = store.value(SPLITTER.format(name=splitter.objectName()))
        if state is not None:
            splitter.restoreState(state)


def first_size(window: QMainWindow) -> QSize:
    """The size of a first run: the default, made smaller to fit a laptop's screen."""
    wanted = QSize(*DEFAULT_SIZE)
    screen = window.screen()
    if screen is None:
        return wanted
    room = screen.availableGeometry().size()
    return wanted.boundedTo(QSize(room.width() - 16, room.height() - 40))


def save_geometry(window: QMainWindow, store: QSettings) -> None:
    store.setValue(GEOMETRY, window.saveGeometry())
    for splitter in window.findChildren(QSplitter):
        store.setValue(SPLITTER.format(name=splitter.objectName()), splitter.saveState())


def job_columns(store: QSettings) -> QByteArray | None:
    value = store.value(JOB_COLUMNS)
    return value if isinstance(value, QByteArray) else None


def save_job_columns(store: QSettings, state: QByteArray) -> None:
    store.setValue(JOB_COLUMNS, state)


def pixels_view(store: QSettings) -> bool:
    return bool(store.value(PIXELS, False, type=bool))


def save_pixels_view(store: QSettings, on: bool) -> None:
    store.setValue(PIXELS, on)


def last_form(store: QSettings) -> dict[str, str]:
    """The form's fields as last used (empty on a first run)."""
    store.beginGroup(FORM_GROUP)
    last_used = {key: str(store.value(key)) for key in store.childKeys()}
    store.endGroup()
    return last_used


def save_form(store: QSettings, values: dict[str, str]) -> None:
    store.beginGroup(FORM_GROUP)
    for key, value in values.items():
        store.setValue(key, value)
    store.endGroup()


def remember_paused_at_quit(store: QSettings, job_ids: Sequence[int]) -> None:
    """Add the jobs this window's quit paused to those remembered: another window on the
    same window.ini may have quit before it, and its jobs are offered at the next launch too.
    Nothing paused writes nothing."""
    if not job_ids:
        return
    store.sync()  # read what another Easel process wrote since this one opened the file
    remembered = _paused_ids(store.value(PAUSED_AT_QUIT, []))
    store.setValue(PAUSED_AT_QUIT, [str(i) for i in dict.fromkeys((*remembered, *job_ids))])
    store.sync()


def take_paused_at_quit(store: QSettings) -> tuple[int, ...]:
    """The jobs the last quit paused; forgotten once read, so they are offered once."""
    saved = store.value(PAUSED_AT_QUIT, [])
    store.remove(PAUSED_AT_QUIT)
    return _paused_ids(saved)


def _paused_ids(saved: object) -> tuple[int, ...]:
    items = saved if isinstance(saved, list) else [saved]  # one item reads as a string
    return tuple(int(str(i)) for i in items if str(i).isdigit())
