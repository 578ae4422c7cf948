"""The window's language: Chinese or English, following the system unless Settings say otherwise.

The translations live in resources/i18n (`make translations` rebuilds them from the code).
Only the window is translated; the command line keeps English.
"""

from __future__ import annotations

from enum import Enum

from PySide6.QtCore import QCoreApplication, QLibraryInfo, QLocale, QSettings, QTranslator

from app.engine.paths import resources_dir
from app.ui.presenters import i18n

I18N_DIR = resources_dir() / "i18n"
LANGUAGE_KEY = "view/language"


class Language(Enum):
    SYSTEM = "system"
    ENGLISH = "en"
    CHINESE = "zh_CN"


# Each language names itself in its own words, so anyone can find theirs.
LANGUAGE_NAMES = {
    Language.ENGLISH: "English",
    Language.CHINESE: "简体中文",
}
TRANSLATED = (Language.CHINESE,)

_installed: list[QTranslator] = []


def chosen_language(store: QSettings) -> Language:
    value = str(store.value(LANGUAGE_KEY, Language.SYSTEM.value))
    return next((lang for lang in Language if lang.value == value), Language.SYSTEM)


def effective_language(choice: Language, system: QLocale | None = None) -> Language:
    """The language shown for `choice`; SYSTEM picks Chinese for any Chinese locale."""
    if choice is not Language.SYSTEM:
        return choice
    locale = system or QLocale.system()
    return Language.CHINESE if locale.language() == QLocale.Language.Chinese else Language.ENGLISH


def use_language(choice: Language) -> Language:
    """Install the translators for `choice` (replacing earlier ones); returns what is shown."""
    app = QCoreApplication.instance()
    assert app is not None, "create the QApplication first"
    for old in _installed:
        app.removeTranslator(old)
    _installed.clear()
    language = effective_language(choice)
    if language in TRANSLATED:
        qt_dir = QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath)
        # Qt's own words too (the Save and Cancel buttons of dialogs, the text field menu).
        for name, folder in ((f"easel_{language.value}", str(I18N_DIR)),
                             (f"qtbase_{language.value}", qt_dir)):  # fmt: skip
            translator = QTranslator(app)
            if translator.load(name, folder):
                app.installTranslator(translator)
                _installed.append(translator)
    i18n.install(QCoreApplication.translate if _installed else None)
    return language if _installed else Language.ENGLISH
