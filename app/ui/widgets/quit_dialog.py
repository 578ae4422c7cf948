"""The question asked when the window closes while jobs run."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget

QUIT_QUESTION = (
    "Pause {n} running job{s} and quit? They will continue from where they stopped next time."
)


def quit_question(running: int) -> str:
    return QUIT_QUESTION.format(n=running, s="s" * (running != 1))


def quit_box(parent: QWidget, running: int) -> tuple[QMessageBox, QPushButton]:
    """The question and its "Pause and quit" button (the default: no work is lost)."""
    box = QMessageBox(parent)
    box.setWindowTitle("Quit Easel")
    box.setIcon(QMessageBox.Icon.Question)
    box.setText(quit_question(running))
    pause = box.addButton("Pause and quit", QMessageBox.ButtonRole.AcceptRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(pause)
    return box, pause


def ask_pause_and_quit(parent: QWidget, running: int) -> bool:
    box, pause = quit_box(parent, running)
    box.exec()
    return box.clickedButton() is pause
