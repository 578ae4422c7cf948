"""Help > Keyboard shortcuts: the list the window binds its keys from."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from app.ui.presenters import shortcuts


class ShortcutsDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Keyboard shortcuts"))
        self.table = QLabel(shortcuts_html())
        self.table.setTextFormat(Qt.TextFormat.RichText)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)


def shortcuts_html() -> str:
    rows = "".join(
        f"<tr><td><b>{html.escape(s.shown)}</b>&nbsp;&nbsp;</td>"
        f"<td>{html.escape(s.what_text)}</td><td style='color:#9aa1ab'>&nbsp;&nbsp;"
        f"{html.escape(s.where_text)}</td></tr>"
        for s in shortcuts.ALL
    )
    return f"<table cellpadding='3'>{rows}</table>"
