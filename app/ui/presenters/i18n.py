"""Translation without Qt: presenters word their text through `translate`, Qt fills it in.

The Qt-free modules must import without PySide6 (tests/ui/test_layout.py), yet their
sentences are user-visible. They call `translate(context, text)`, which `pyside6-lupdate`
collects like `QCoreApplication.translate`; the window installs the real one at start
(`app.ui.qt.language`), and until then (the CLI, tests) the English text is returned as is.
Strings kept in module-level tables are marked with `QT_TRANSLATE_NOOP` and translated
where they are shown.
"""

from __future__ import annotations

from collections.abc import Callable

Translate = Callable[[str, str], str]


def _english(_context: str, text: str) -> str:
    return text


_translate: Translate = _english


def install(translate_fn: Translate | None) -> None:
    """Route `translate` through `translate_fn` (None: English again)."""
    global _translate
    _translate = translate_fn or _english


def translate(context: str, text: str) -> str:
    return _translate(context, text)


def QT_TRANSLATE_NOOP(_context: str, text: str) -> str:
    """Marks `text` for lupdate; translated later with `translate(context, text)`."""
    return text
