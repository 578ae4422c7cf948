"""The GUI process never imports torch: generation lives in worker processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# A hang must fail fast, not stall the whole suite (the suite-wide limit is 10 min).
pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]

# Runs the real entry point (`python -m app` with no command: store, recovery, supervisor,
# window), notes what the process had imported when the window first painted, then closes it.
SCRIPT = """
import sys
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication
from app.cli import main
from app.ui.widgets.window import MainWindow

HEAVY = {"sqlalchemy", "sqlmodel", "pydantic", "PIL", "numpy", "psycopg", "cv2", "torch"}

class FirstPaint(QObject):
    def eventFilter(self, watched, event):
        if event.type() == QEvent.Type.Paint and isinstance(watched, MainWindow):
            QApplication.instance().removeEventFilter(self)
            print("loaded at first paint:", sorted(set(sys.modules) & HEAVY), flush=True)
            QTimer.singleShot(300, check)  # the store opens meanwhile
        return False

def check():
    window = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow))
    if not window.isVisible():
        return  # closed already
    print("torch loaded:", "torch" in sys.modules, flush=True)
    print("start-up loaded:", sorted(set(sys.modules) & {"numpy", "psycopg", "cv2"}), flush=True)
    window.close()

app = QApplication(sys.argv)
first_paint = FirstPaint()
app.installEventFilter(first_paint)
QTimer.singleShot(20_000, check)  # never painted: the test fails, the window still closes
code = main([])
print("torch loaded at exit:", "torch" in sys.modules, flush=True)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The real entry point run once: what it printed."""
    home = tmp_path_factory.mktemp("no-torch") / "home"
    # Not this process's EASEL_* variables: an in-process CLI test's `--db URL` sets
    # EASEL_DB here for good, and the window would then open that PostgreSQL queue.
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("EASEL_")}
    env = {**inherited, "EASEL_HOME": str(home), "QT_QPA_PLATFORM": "offscreen",
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def test_the_window_process_never_imports_torch(started: str) -> None:
    assert "torch loaded: False" in started, started
    assert "torch loaded at exit: False" in started


def test_the_window_opens_without_what_it_needs_only_later(started: str) -> None:
    """numpy (the mask editor, outpaint, control preprocessors), OpenCV and the PostgreSQL
    driver load when first used: together they were a third of the window's start-up."""
    assert "start-up loaded: []" in started, started


def test_the_window_paints_before_the_database_stack_is_imported(started: str) -> None:
    """SQLAlchemy, SQLModel and pydantic, PIL: most of a second of imports that the window's
    first paint used to wait for, through the command line's modules, the settings dialog, the
    group, guidance and mask menus' imports, and the database thread sharing the GIL. The
    store opens right after the paint (`app.ui.main`), and each of those loads when used."""
    assert "loaded at first paint: []" in started, started
