"""The layering is enforced, not promised (docs/architecture.md, "Where code lives").

Two checks, each shown to fail on a planted fault in a copy of the source tree:
- the import-linter contracts in pyproject.toml (`make lint` runs the same `lint-imports`);
- no import circle between any two modules of `app`, lazy imports inside functions and
  `if TYPE_CHECKING:` imports included (a function-level import is how a circle hides; a
  type-only one is a circle in the design, if not at run time: two modules that each need
  the other's names, as a window and a section that took the window did).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


# --- the import graph ---------------------------------------------------------------------------


def module_names(source_root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` under `source_root`, by dotted name."""
    names = {}
    for path in sorted((source_root / package).rglob("*.py")):
        parts = path.relative_to(source_root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the same package that `name` imports, anywhere in the file."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, path, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else _known(base, modules))
    found.discard("")
    found.discard(name)
    return found


def _absolute(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _known(dotted: str, modules: dict[str, Path]) -> str:
    """`dotted` or its nearest enclosing module of ours; "" for anything outside."""
    parts = dotted.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return ""


def import_cycles(source_root: Path, package: str = "app") -> list[list[str]]:
    """Each set of modules that import each other in a circle (Tarjan's strongly connected
    components of more than one module), sorted."""
    modules = module_names(source_root, package)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    return _circles(graph)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            component.append(node)
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


# --- the tests ----------------------------------------------------------------------------------


def test_app_has_no_import_circle() -> None:
    assert import_cycles(ROOT) == []


def test_a_planted_circle_is_found_even_behind_a_lazy_import(tmp_path: Path) -> None:
    copy = _copy_of_app(tmp_path)
    errors = copy / "app" / "errors.py"
    planted = "\n\ndef _planted() -> None:\n    import app.engine.jobs.queue\n"
    errors.write_text(errors.read_text() + planted)

    circles = import_cycles(copy)

    assert circles, "the planted errors -> queue -> errors circle was not found"
    assert any({"app.errors", "app.engine.jobs.queue"} <= set(circle) for circle in circles)


def test_a_type_checking_import_closes_a_circle_too(tmp_path: Path) -> None:
    copy = _copy_of_app(tmp_path)
    errors = copy / "app" / "errors.py"
    # errors.py imports nothing of app at run time: this import alone closes a circle.
    planted = "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
    planted += "    import app.engine.jobs.queue\n"
    errors.write_text(errors.read_text() + planted)

    assert any({"app.errors", "app.engine.jobs.queue"} <= set(c) for c in import_cycles(copy))


def test_the_import_contracts_are_kept() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_model_that_imports_the_window_breaks_the_layers_contract(tmp_path: Path) -> None:
    copy = _copy_of_app(tmp_path)
    (copy / "app" / "models" / "planted.py").write_text("from app.ui import wiring\n")

    result = _lint_imports(copy)

    assert result.returncode != 0
    assert "app.models.planted -> app.ui.wiring" in result.stdout


def test_an_engine_module_that_imports_qt_breaks_its_contract(tmp_path: Path) -> None:
    copy = _copy_of_app(tmp_path)
    (copy / "app" / "engine" / "jobs" / "planted.py").write_text("from PySide6 import QtCore\n")

    result = _lint_imports(copy)

    assert result.returncode != 0
    assert "app.engine.jobs.planted -> PySide6" in result.stdout


def test_a_server_module_that_writes_sql_breaks_its_contract(tmp_path: Path) -> None:
    copy = _copy_of_app(tmp_path)
    (copy / "app" / "server" / "planted.py").write_text("from sqlalchemy import select\n")

    result = _lint_imports(copy)

    assert result.returncode != 0
    assert "app.server.planted -> sqlalchemy" in result.stdout


def _copy_of_app(tmp_path: Path) -> Path:
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "app", copy / "app", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the tree at `root`, importing `app` from there, not from this checkout."""
    return subprocess.run(
        [str(LINT_IMPORTS), str(root / "pyproject.toml"), "--no-cache"],
        cwd=root, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
