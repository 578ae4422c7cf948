"""Show a file selected in the system's file manager ("Show in folder"), Qt-free.

Each system has its own way: Windows' Explorer takes `/select,<path>`, macOS' `open -R`
reveals in the Finder, and Linux file managers (Nautilus, Dolphin, Nemo, Caja, Thunar…)
answer the freedesktop D-Bus call org.freedesktop.FileManager1.ShowItems. When none of
that works (no file manager on the bus, the command cannot start, the file is gone), the
folder is opened instead, and only if that fails too is it a problem to report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Protocol

from app.ui.presenters.i18n import translate

FILE_MANAGER_SERVICE = "org.freedesktop.FileManager1"
FILE_MANAGER_PATH = "/org/freedesktop/FileManager1"
SHOW_ITEMS = "ShowItems"  # (as uris, s startup id)


@dataclass(frozen=True)
class RevealCommand:
    """How this system shows a file selected: a program to start, or the D-Bus call."""

    program: str = ""
    arguments: tuple[str, ...] = ()
    show_items: tuple[str, ...] = ()  # file URIs for FileManager1.ShowItems (Linux and BSDs)


def reveal_command(path: PurePath, platform: str = sys.platform) -> RevealCommand:
    """The way to select `path` (absolute) in the file manager of `platform` (sys.platform)."""
    if platform == "win32":
        # Two arguments, as Qt Creator starts it: QProcess then quotes a path with spaces
        # on its own, which Explorer accepts after "/select,".
        return RevealCommand("explorer.exe", ("/select,", str(path)))
    if platform == "darwin":
        return RevealCommand("open", ("-R", str(path)))
    return RevealCommand(show_items=(path.as_uri(),))


class Launcher(Protocol):
    """What `show_in_folder` needs from the desktop (Qt in the window, a fake in tests)."""

    def start(self, program: str, arguments: Sequence[str]) -> bool:
        """Start a program detached; False if it could not be started."""

    def show_items(self, uris: Sequence[str], failed: Callable[[], None]) -> None:
        """Ask the file manager over D-Bus; `failed` is called if none answers."""

    def open_folder(self, folder: Path) -> bool:
        """Open a folder the system's usual way; False if that failed."""


def show_in_folder(
    path: Path, launcher: Launcher, problem: Callable[[str], None], platform: str = sys.platform
) -> None:
    """Select `path` in the file manager, else open its folder, else report `problem`."""
    path = path.absolute()

    def open_the_folder() -> None:
        if not launcher.open_folder(path.parent):
            problem(
                translate("Reveal", "Could not open the folder {path}").format(path=path.parent)
            )

    if not path.exists():  # nothing to select: the folder at least shows what is there
        open_the_folder()
        return
    command = reveal_command(path, platform)
    if command.show_items:
        launcher.show_items(command.show_items, open_the_folder)
    elif not launcher.start(command.program, command.arguments):
        open_the_folder()
