"""docs/architecture.md's tables equal the code's, so the page cannot drift from the table.

On a mismatch the failure prints the rows to add and to remove, ready to paste.
"""

from __future__ import annotations

import re
from collections.abc import Set
from pathlib import Path

from app.engine.jobs.states import ALREADY_SATISFIED, TRANSITIONS, JobEvent, JobStatus

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
NEW = "(new)"  # the page's name for "a job that does not exist yet" (None in the table)


def table_after(marker: str) -> list[list[str]]:
    """The cells of the Markdown table that follows the `<!-- marker...` comment."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"<!-- {marker}"))
    rows = []
    for line in lines[start + 3 :]:  # the comment, the header and the |---| line
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def diff(on_page: Set[tuple[str, ...]], in_code: Set[tuple[str, ...]]) -> str:
    """The rows to add and to remove, written as table rows (the "why" cell left empty)."""

    def rows(cells: Set[tuple[str, ...]]) -> str:
        return "".join(f"\n| {' | '.join(row)} | |" for row in sorted(cells)) or " none"

    return f"add{rows(in_code - on_page)}\nremove{rows(on_page - in_code)}"


def status_name(status: JobStatus | None) -> str:
    return NEW if status is None else status.value


def test_the_transition_table_on_the_page_is_the_code_s() -> None:
    on_page = {(source, event, target) for source, event, target, _why in table_after("trans")}
    in_code = {
        (status_name(source), event.value, target.value)
        for (source, event), target in TRANSITIONS.items()
    }
    assert on_page == in_code, "docs/architecture.md's transition table: " + diff(on_page, in_code)


def test_every_row_on_the_page_is_written_once() -> None:
    rows = [tuple(row[:2]) for row in table_after("trans")]
    assert len(rows) == len(set(rows))


def test_the_statuses_on_the_page_are_the_code_s_with_their_terminal_mark() -> None:
    on_page = {(name, terminal == "yes") for name, _meaning, terminal in table_after("statuses")}
    in_code = {(status.value, status.is_terminal) for status in JobStatus}
    assert on_page == in_code


def test_the_already_satisfied_requests_on_the_page_are_the_code_s() -> None:
    on_page = {(status, event) for status, event in table_after("already satisfied")}
    in_code = {(status.value, event.value) for status, event in ALREADY_SATISFIED}
    assert on_page == in_code


def test_every_event_appears_on_the_page() -> None:
    events_on_page = {event for _s, event, _t, _why in table_after("trans")}
    assert events_on_page == {event.value for event in JobEvent}


ROOT = DOC.parents[1]
TREE_INDENT = 2  # each level of the tree in "Where code lives" is two spaces deeper
# `state.py, run.py`, `jobs/`, and `<name>/`: a pattern for any one folder there (the model
# families: a new family's package needs no line of its own).
TREE_ENTRY = re.compile(r"(<\w+>|[\w.]+)(/|\.py)(, [\w.]+\.py)*")
PATTERN = re.compile(r"<\w+>")


def named(path: str, tree: list[str]) -> bool:
    """Whether the tree names `path`, itself or by a `<name>` pattern."""
    return any(fullmatch(entry, path) for entry in tree)


def fullmatch(entry: str, path: str) -> bool:
    parts = (re.escape(part) for part in PATTERN.split(entry))
    return re.fullmatch("[^/]+".join(parts), path) is not None


def tree_paths() -> list[str]:
    """The paths the "Where code lives" tree names: `app/engine/jobs/queue.py`, ...

    An entry is a line's leading names, e.g. `controlnets.py, ip_adapters.py  finding ...`;
    a line that starts with none, or deeper than a folder's children, continues a
    description."""
    text = DOC.read_text(encoding="utf-8").split("## Where code lives", 1)[1]
    block = text.split("```", 2)[1].splitlines()[1:]
    parents: list[str] = []
    paths = []
    for line in block:
        rest = line.lstrip()
        level = (len(line) - len(rest)) // TREE_INDENT
        entry = TREE_ENTRY.match(rest)
        if level > len(parents) or entry is None:
            continue  # a description carried over from the line above
        del parents[level:]
        names = [name.strip() for name in entry[0].split(",")]
        paths += ["".join(parents) + name for name in names]
        if entry[0].endswith("/"):
            parents.append(entry[0])
    return paths


def test_every_path_the_code_tree_names_exists() -> None:
    """A `<name>` pattern exists when some folder fits it."""
    missing = [
        path for path in tree_paths() if not any(ROOT.glob(PATTERN.sub("*", path.rstrip("/"))))
    ]
    assert not missing, f"docs/architecture.md's tree names what is not there: {missing}"


def test_every_package_of_app_is_in_the_code_tree() -> None:
    tree = tree_paths()
    packages = {
        f"{init.parent.relative_to(ROOT).as_posix()}/" for init in ROOT.glob("app/**/__init__.py")
    }
    unnamed = sorted(package for package in packages if not named(package, tree))
    assert not unnamed, f"add to docs/architecture.md's tree: {unnamed}"


def test_the_families_are_named_by_one_pattern_that_fits_only_the_families() -> None:
    """A new family's package (families/qwen/) is in the tree without a line of its own;
    the pattern reaches no deeper, nor into another folder."""
    tree = tree_paths()
    families = "app/engine/generation/families/"
    assert f"{families}<name>/" in tree
    assert named(f"{families}qwen/", tree) and named(f"{families}qwen/model.py", tree)
    assert not named(f"{families}qwen/deeper/", tree)
    assert not named("app/engine/generation/qwen/", tree)


def test_every_model_family_module_is_named_in_the_code_tree() -> None:
    """The families line lists its modules by name: a new family's module must be there."""
    families = ROOT / "app" / "engine" / "generation" / "families"
    text = DOC.read_text(encoding="utf-8").split("## Where code lives", 1)[1].split("```", 2)[1]
    unnamed = [m.name for m in families.glob("*.py") if m.stem != "__init__" and m.name not in text]
    assert not unnamed, f"docs/architecture.md's tree does not name the families' {unnamed}"
