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
    window.close()

app = QApplication(sys.argv)
QTimer.singleShot(300, check)
code = run_gui(sys.argv)
print("torch loaded at exit:", "torch" in sys.modules, flush=True)
sys.exit(code)
"""


def test_the_window_process_never_imports_torch(tmp_path: Path) -> None:
    env = {**os.environ, "EASEL_HOME": str(tmp_path / "home"), "QT_QPA_PLATFORM": "offscreen",
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "torch loaded: False" in result.stdout, result.stdout + result.stderr
    assert "torch loaded at exit: False" in result.stdout
