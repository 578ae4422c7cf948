"""The search box above the job list: type-ahead without a stall.

It only parses: the text is checked a moment after the last key (`DEBOUNCE_MS`), and a
valid search is announced with `searchChanged`; whoever listens runs it off the GUI thread
(`QueueService` on the DbThread) and shows the page it gets. Malformed text (an unclosed
quote) marks the box and says why in its tooltip, and announces nothing.
"""

from __future__ import annotations

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QLineEdit, QWidget

from app.engine.history.search import BadSearch, parse_search

DEBOUNCE_MS = 150


class SearchBox(QLineEdit):
    searchChanged = Signal(str)  # a valid search text ("" shows every job)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("searchBox")
        self.setClearButtonEnabled(True)
        self.setPlaceholderText(self.tr('Search prompts: red circle, "a phrase", -left-out, cat*'))
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._settle)
        self.textEdited.connect(lambda _text: self._timer.start())
        self._announced: str | None = None

    @property
    def problem(self) -> str | None:
        """Why the current text is not a search, or None."""
        try:
            parse_search(self.text())
        except BadSearch as error:
            return str(error)
        return None

    def _settle(self) -> None:
        problem = self.problem
        self.setProperty("invalid", problem is not None)
        self.setToolTip(problem or "")
        self.style().polish(self)  # the style sheet's [invalid="true"] rule applies now
        text = self.text().strip()
        if problem is None and text != self._announced:
            self._announced = text
            self.searchChanged.emit(text)
