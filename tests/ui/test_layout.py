"""The Qt-free half of `app.ui` imports without PySide6 (the layout promises it)."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import app.ui.presenters

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]

# Imports the modules one by one in a fresh interpreter and names the first that pulled Qt in.
SCRIPT = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
    if any(m.startswith(("PySide6", "shiboken6")) for m in sys.modules):
        print("Qt imported by", name)
        break
else:
    print("no Qt")
"""


def qt_free_modules() -> list[str]:
    package = app.ui.presenters
    presenters = [
        f"{package.__name__}.{info.name}" for info in pkgutil.iter_modules(package.__path__)
    ]
    return ["app.ui", "app.ui.wiring", package.__name__, *presenters]


def test_qt_free_modules_import_without_pyside6() -> None:
    modules = qt_free_modules()
    assert "app.ui.presenters.queue_service" in modules  # not vacuous after a rename
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, *modules], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no Qt", result.stdout


def test_the_check_notices_a_module_that_imports_qt() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, "json", "app.ui.qt.theme"], cwd=ROOT, capture_output=True,
        text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert result.stdout.strip() == "Qt imported by app.ui.qt.theme"
