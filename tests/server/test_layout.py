"""The server reaches the store only through the engine, as the window does: no SQL, no
tables, no dialects (pyproject.toml's contract checks run-time imports; this, type-only
ones too)."""

from __future__ import annotations

from pathlib import Path

from tests.ui.test_layout import store_imports

SERVER = Path(__file__).resolve().parents[2] / "app" / "server"


def test_no_server_module_imports_the_store_stack() -> None:
    modules = sorted(SERVER.rglob("*.py"))
    assert SERVER / "events.py" in modules  # not vacuous after a move
    offenders = {
        path.name: found for path in modules if (found := store_imports(path.read_text("utf-8")))
    }
    assert offenders == {}
