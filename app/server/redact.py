"""Errors sent to a remote client never show a server path.

Requests name models and files by name (`check_runnable(names_only=True)`), so their
refusals name no folder; what a worker or the disk says (a failed job's error, a full
disk) may. Before any such text leaves the server, the folders it knows (the models, data,
outputs and checkpoints folders, the Hugging Face cache, the home folder) are replaced by
the names the README uses for them: `<models>`, `<data>`, `~`, ...
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from app.engine import paths
from app.engine.paths import resolved
from app.engine.settings import Settings

LOG_NAME = "the server's log"  # where an internal error's details are, as a client reads it


def server_folders(settings: Settings) -> list[tuple[str, str]]:
    """(folder as text, its label) for every folder a message could name, the longest
    first so that the most specific label wins; each folder also with its links followed."""
    search = settings.model_search_path()
    labelled: list[tuple[Path, str]] = [
        *((folder, "<bundled models>") for folder in search.bundled),
        *((folder, "<models>") for folder in search.user),
        *((folder, "<Hugging Face cache>") for folder in search.hf_caches),
        (Path(settings.outputs_dir) if settings.outputs_dir else paths.outputs_dir(create=False),
         "<outputs>"),
        (paths.data_dir(), "<data>"),
        (Path.home(), "~"),
    ]  # fmt: skip
    pairs: dict[str, str] = {}
    for folder, label in labelled:
        for form in _forms(folder):
            pairs.setdefault(form, label)
    return sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True)


def redact(text: str, folders: Iterable[tuple[str, str]]) -> str:
    """`text` with each known server folder replaced by its label."""
    for folder, label in folders:
        if folder in text:
            text = text.replace(folder, label)
    return text


def _forms(folder: Path) -> list[str]:
    real = resolved(folder)
    forms = [str(folder), *([str(real)] if real is not None else [])]
    return [form for form in forms if len(form) > 1]  # never "/" alone
