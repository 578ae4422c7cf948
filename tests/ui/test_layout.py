"""The Qt-free half of `app.ui` imports without PySide6 (the layout promises it)."""

from __future__ import annotations

import ast
import os
import pkgutil
import re
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


# The window reaches the store only through the engine: no SQL, no tables, no dialects.
STORE_MODULES = ("sqlalchemy", "app.models")
UI = ROOT / "app" / "ui"


def store_imports(source: str) -> list[str]:
    """The modules of the store stack that `source` imports (anywhere: type-only too)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [n for n in names if any(n == m or n.startswith(m + ".") for m in STORE_MODULES)]
    return found


def test_no_ui_module_imports_the_store_stack() -> None:
    modules = sorted(UI.rglob("*.py"))
    assert UI / "presenters" / "queue_service.py" in modules  # not vacuous after a move
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in modules
        if (found := store_imports(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_no_ui_module_reaches_for_the_queues_database() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted(UI.rglob("*.py"))
        if re.search(r"queue\.db\b", path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_store_check_notices_an_import() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import sqlalchemy.orm\n"
    source += "def f() -> None:\n    from app.models.tables import JOB\n"
    assert store_imports(source) == ["sqlalchemy.orm", "app.models.tables"]
    assert store_imports("import sqlalchemyish\nfrom app.modelsx import y\n") == []
