"""Python's garbage collector runs on the GUI thread only, on a timer.

The collector normally runs in whichever thread happens to allocate. When it frees a Qt
object there, PySide disconnects its signals from that thread: it takes one of Qt's
connection locks and then waits for the GIL, while the GUI thread, deleting a widget,
holds the GIL and waits for the same lock. A deadlock, seen in this project's tests
(`gdb` shows `handle_weakrefs -> QObject::disconnect` on a database thread). Collecting
from the GUI thread only, as other PySide apps do, rules it out.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

CHECK_MS = 500


class GuiThreadCollector(QObject):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.check)

    def install(self) -> None:
        gc.disable()
        self._timer.start(CHECK_MS)

    def uninstall(self) -> None:
        self._timer.stop()
        gc.enable()

    def check(self) -> None:
        """Collect the generations whose counts passed their thresholds, like gc would."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        due = [g for g in range(3) if counts[g] > thresholds[g]]
        if due:
            gc.collect(max(due))


_collector: GuiThreadCollector | None = None


def collect_on_gui_thread() -> GuiThreadCollector:
    """Install the process-wide collector once (call on the GUI thread)."""
    global _collector
    if _collector is None:
        _collector = GuiThreadCollector()
        _collector.install()
    return _collector
