"""Every keyboard shortcut of the window, in one list: the bindings and the help read it.

`keys` are QKeySequence strings (portable text, no Qt import here); the first is the one
shown in Help > Keyboard shortcuts.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate


@dataclass(frozen=True)
class Shortcut:
    keys: tuple[str, ...]
    what: str
    where: str = QT_TRANSLATE_NOOP("Shortcuts", "Anywhere")

    @property
    def shown(self) -> str:
        return translate("Shortcuts", " or ").join(self.keys)

    @property
    def what_text(self) -> str:
        return translate("Shortcuts", self.what)

    @property
    def where_text(self) -> str:
        return translate("Shortcuts", self.where)


_LIST = QT_TRANSLATE_NOOP("Shortcuts", "Job list")
GENERATE = Shortcut(
    ("Ctrl+Return", "Ctrl+Enter"), QT_TRANSLATE_NOOP("Shortcuts", "Queue the prompt")
)
CANCEL = Shortcut(
    ("Delete",),
    QT_TRANSLATE_NOOP("Shortcuts", "Cancel the selected jobs (queued ones can be undone)"),
    _LIST,
)
PAUSE_OR_RESUME = Shortcut(
    ("Space",), QT_TRANSLATE_NOOP("Shortcuts", "Pause or resume the selected jobs"), _LIST
)
OPEN_IMAGE = Shortcut(
    ("Return", "Enter"), QT_TRANSLATE_NOOP("Shortcuts", "View the selected job's image"), _LIST
)
MENU = Shortcut(
    ("Shift+F10", "Menu"), QT_TRANSLATE_NOOP("Shortcuts", "Actions for the selected jobs"), _LIST
)
STEP = Shortcut(
    ("Up", "Down"),
    QT_TRANSLATE_NOOP("Shortcuts", "Step the number by one (Page Up/Down: by ten)"),
    QT_TRANSLATE_NOOP("Shortcuts", "Number fields"),
)
MOVE_UP = Shortcut(
    ("Ctrl+Up",), QT_TRANSLATE_NOOP("Shortcuts", "Run the selected queued jobs sooner"), _LIST
)
MOVE_DOWN = Shortcut(
    ("Ctrl+Down",), QT_TRANSLATE_NOOP("Shortcuts", "Run the selected queued jobs later"), _LIST
)
NEXT_PANE = Shortcut(
    ("F6",), QT_TRANSLATE_NOOP("Shortcuts", "Go to the next area: prompt, job list, timeline")
)
SEARCH = Shortcut(("Ctrl+F",), QT_TRANSLATE_NOOP("Shortcuts", "Search the jobs by prompt"))
SETTINGS = Shortcut(("Ctrl+,",), QT_TRANSLATE_NOOP("Shortcuts", "Settings"))
HELP = Shortcut(("F1",), QT_TRANSLATE_NOOP("Shortcuts", "This list of shortcuts"))
QUIT = Shortcut(
    ("Ctrl+Q",), QT_TRANSLATE_NOOP("Shortcuts", "Quit (running jobs pause and continue next time)")
)

# A finished clip's player (`widgets/clip_player.py`), once its picture or bar has the keys.
_CLIP = QT_TRANSLATE_NOOP("Shortcuts", "A clip (click its picture)")
PLAY_CLIP = Shortcut(("Space", "K"), QT_TRANSLATE_NOOP("Shortcuts", "Play or pause"), _CLIP)
FRAME_BACK = Shortcut(("Left", ","), QT_TRANSLATE_NOOP("Shortcuts", "One frame back"), _CLIP)
FRAME_ON = Shortcut(("Right", "."), QT_TRANSLATE_NOOP("Shortcuts", "One frame on"), _CLIP)
CLIP_START = Shortcut(("Home",), QT_TRANSLATE_NOOP("Shortcuts", "The first frame"), _CLIP)
CLIP_END = Shortcut(("End",), QT_TRANSLATE_NOOP("Shortcuts", "The last frame"), _CLIP)

ALL = (GENERATE, NEXT_PANE, SEARCH, CANCEL, PAUSE_OR_RESUME, MOVE_UP, MOVE_DOWN, OPEN_IMAGE,
       MENU, STEP, PLAY_CLIP, FRAME_BACK, FRAME_ON, CLIP_START, CLIP_END, SETTINGS, HELP,
       QUIT)  # fmt: skip
