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

# Runs the real entry point (store, recovery, supervisor, window), then closes the window.
SCRIPT = """
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from app.ui.main import run_gui
from app.ui.widgets.window import MainWindow

def check():
    window = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow))
    assert window.isVisible()
    print("torch loaded:", "torch" in sys.modules, flush=True)
    print("start-up loaded:", sorted(set(sys.modules) & {"numpy", "psycopg", "cv2"}), flush=True)
    window.close()

app = QApplication(sys.argv)
QTimer.singleShot(300, check)
code = run_gui(sys.argv)
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
