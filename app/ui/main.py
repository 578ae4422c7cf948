"""The window's entry point (the full GUI is being built; see issue 5)."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QMainWindow


def run_gui(argv: list[str]) -> int:
    app = QApplication(argv)
    window = QMainWindow()
    window.setWindowTitle("Easel")
    window.resize(1100, 760)
    window.show()
    return app.exec()
