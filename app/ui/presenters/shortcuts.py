"""Every keyboard shortcut of the window, in one list: the bindings and the help read it.

`keys` are QKeySequence strings (portable text, no Qt import here); the first is the one
shown in Help > Keyboard shortcuts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shortcut:
    keys: tuple[str, ...]
    what: str
    where: str = "Anywhere"

    @property
    def shown(self) -> str:
        return " or ".join(self.keys)


GENERATE = Shortcut(("Ctrl+Return", "Ctrl+Enter"), "Queue the prompt")
CANCEL = Shortcut(("Delete",), "Cancel the selected jobs (queued ones can be undone)", "Job list")
PAUSE_OR_RESUME = Shortcut(("Space",), "Pause or resume the selected jobs", "Job list")
OPEN_IMAGE = Shortcut(("Return", "Enter"), "Open the selected job's image", "Job list")
MENU = Shortcut(("Shift+F10", "Menu"), "Actions for the selected jobs", "Job list")
STEP = Shortcut(("Up", "Down"), "Step the number by one (Page Up/Down: by ten)", "Number fields")
NEXT_PANE = Shortcut(("F6",), "Go to the next area: prompt, job list, timeline")
SETTINGS = Shortcut(("Ctrl+,",), "Settings")
HELP = Shortcut(("F1",), "This list of shortcuts")
QUIT = Shortcut(("Ctrl+Q",), "Quit (running jobs pause and continue next time)")

ALL = (GENERATE, NEXT_PANE, CANCEL, PAUSE_OR_RESUME, OPEN_IMAGE, MENU, STEP, SETTINGS, HELP, QUIT)
