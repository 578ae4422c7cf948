"""The main window's menu bar: Easel, View and Help, bound to what the window does.

The words keep the "MainWindow" translation context they had inside the window, so the
committed translations (resources/i18n) still apply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMenuBar, QWidget

from app.ui.presenters import shortcuts
from app.ui.presenters.i18n import translate
from app.ui.presenters.shortcuts import Shortcut

Slot = Callable[[], object]


@dataclass(frozen=True)
class MenuSlots:
    """What each menu entry does."""

    settings: Slot
    about: Slot
    quit: Slot
    search: Slot
    statistics: Slot
    workers: Slot
    shortcuts: Slot
    models_folder: Slot


def build_menus(bar: QMenuBar, owner: QWidget, slots: MenuSlots) -> None:
    app = bar.addMenu("&Easel")  # the name of the app: the same in every language
    _add(app, owner, translate("MainWindow", "&Settings…"), slots.settings, shortcuts.SETTINGS)
    _add(app, owner, translate("MainWindow", "&About Easel"), slots.about)
    app.addSeparator()
    _add(app, owner, translate("MainWindow", "&Quit"), slots.quit, shortcuts.QUIT)
    view = bar.addMenu(translate("MainWindow", "&View"))
    _add(view, owner, translate("MainWindow", "&Search jobs"), slots.search, shortcuts.SEARCH)
    _add(view, owner, translate("MainWindow", "S&tatistics…"), slots.statistics)
    _add(view, owner, translate("MainWindow", "&Workers…"), slots.workers)
    view.addSeparator()
    _add(view, owner, translate("MainWindow", "Open &models folder"), slots.models_folder)
    help_menu = bar.addMenu(translate("MainWindow", "&Help"))
    keys = translate("MainWindow", "&Keyboard shortcuts")
    _add(help_menu, owner, keys, slots.shortcuts, shortcuts.HELP)


def _add(
    menu: QMenu, owner: QWidget, text: str, slot: Slot, shortcut: Shortcut | None = None
) -> QAction:
    action = QAction(text, owner)
    if shortcut is not None:
        action.setShortcuts(key_sequences(shortcut))
    action.triggered.connect(slot)
    menu.addAction(action)
    return action


def key_sequences(shortcut: Shortcut) -> list[QKeySequence]:
    return [QKeySequence(keys) for keys in shortcut.keys]
