"""The question asked when the window closes while jobs run."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget

from app.ui.presenters.i18n import translate


def quit_question(running: int) -> str:
    if running == 1:
        return translate(
            "QuitDialog",
            "Pause 1 running job and quit? It will continue from where it stopped next time.",
        )
    return translate(
        "QuitDialog",
        "Pause {n} running jobs and quit? They will continue from where they stopped next time.",
    ).format(n=running)


def quit_box(parent: QWidget, running: int) -> tuple[QMessageBox, QPushButton]:
    """The question and its "Pause and quit" button (the default: no work is lost)."""
    box = QMessageBox(parent)
    box.setWindowTitle(translate("QuitDialog", "Quit Easel"))
    box.setIcon(QMessageBox.Icon.Question)
    box.setText(quit_question(running))
    pause = box.addButton(
        translate("QuitDialog", "Pause and quit"), QMessageBox.ButtonRole.AcceptRole
    )
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(pause)
    return box, pause


def ask_pause_and_quit(parent: QWidget, running: int) -> bool:
    box, pause = quit_box(parent, running)
    box.exec()
    return box.clickedButton() is pause
