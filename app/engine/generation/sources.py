"""Where generation models come from: bundled, the user's models folder, the HF cache.

Pure filesystem (no torch, no network) so the GUI can list models cheaply. A model is a
diffusers pipeline folder, i.e. a folder holding `model_index.json`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from app.engine.paths import bundled_models_dir, models_dir
from app.errors import MissingModel

MODEL_INDEX = "model_index.json"
_HF_PREFIX = "models--"


class ModelSource(Enum):
    BUNDLED = "bundled"
    USER = "user"
    HF_CACHE = "hf-cache"


@dataclass(frozen=True)
class ModelInfo:
    name: str
    path: Path
    source: ModelSource
    pipeline_class: str = ""


class ModelNotFound(MissingModel):
    """No model of that name; the message names the model and every place searched."""

    def __init__(self, name: str, searched: Sequence[Path]) -> None:
        places = ", ".join(str(p) for p in searched) or "(no model folders)"
        super().__init__(f"model {name!r} was not found; looked in: {places}")
        self.name = name
        self.searched = tuple(searched)


@dataclass(frozen=True)
class ModelSearchPath:
    """The folders searched, in precedence order (first match wins on a name clash)."""

    bundled: tuple[Path, ...] = ()
    user: tuple[Path, ...] = ()
    hf_caches: tuple[Path, ...] = ()

    def all_folders(self) -> list[Path]:
        return [*self.bundled, *self.user, *self.hf_caches]


def hf_cache_dirs(env: dict[str, str] | None = None) -> tuple[Path, ...]:
    """The Hugging Face hub cache folders huggingface_hub itself would use, most specific first."""
    env = dict(os.environ) if env is None else env
    candidates: list[Path] = []
    if env.get("HF_HUB_CACHE"):
        candidates.append(Path(env["HF_HUB_CACHE"]))
    if env.get("HF_HOME"):
        candidates.append(Path(env["HF_HOME"]) / "hub")
    if env.get("XDG_CACHE_HOME"):
        candidates.append(Path(env["XDG_CACHE_HOME"]) / "huggingface" / "hub")
    candidates.append(Path.home() / ".cache" / "huggingface" / "hub")
    return tuple(dict.fromkeys(p.expanduser() for p in candidates))


def default_search_path() -> ModelSearchPath:
    return ModelSearchPath(
        bundled=(bundled_models_dir(),), user=(models_dir(),), hf_caches=hf_cache_dirs()
    )


def list_models(search: ModelSearchPath | None = None) -> list[ModelInfo]:
    """Every model found, bundled first, then the user's, then the HF cache; names are unique."""
    search = search or default_search_path()
    found: dict[str, ModelInfo] = {}
    for info in _scan(search):
        found.setdefault(info.name, info)
    return list(found.values())


def resolve_model(name: str, search: ModelSearchPath | None = None) -> ModelInfo:
    """The model called `name` (or a pipeline folder given by path), else `ModelNotFound`."""
    search = search or default_search_path()
    for info in _scan(search):
        if info.name == name:
            return info
    direct = Path(name).expanduser()
    if direct.is_absolute() and (direct / MODEL_INDEX).is_file():
        return _info(direct.name, direct, ModelSource.USER)
    raise ModelNotFound(name, search.all_folders())


def _scan(search: ModelSearchPath) -> Iterator[ModelInfo]:
    for folder in search.bundled:
        yield from _pipeline_folders(folder, ModelSource.BUNDLED)
    for folder in search.user:
        yield from _pipeline_folders(folder, ModelSource.USER)
    for folder in search.hf_caches:
        yield from _hf_cache_models(folder)


def _pipeline_folders(folder: Path, source: ModelSource) -> Iterator[ModelInfo]:
    for child in _sorted_children(folder):
        if (child / MODEL_INDEX).is_file():
            yield _info(child.name, child, source)


def _hf_cache_models(cache: Path) -> Iterator[ModelInfo]:
    for repo in _sorted_children(cache):
        if not repo.name.startswith(_HF_PREFIX):
            continue
        snapshot = _pipeline_snapshot(repo)
        if snapshot is not None:
            # huggingface_hub stores "org/name" as "models--org--name".
            repo_id = repo.name[len(_HF_PREFIX) :].replace("--", "/")
            yield _info(repo_id, snapshot, ModelSource.HF_CACHE)


def _pipeline_snapshot(repo: Path) -> Path | None:
    """The snapshot `refs/main` points to if it is a pipeline, else the newest one that is."""
    ref = repo / "refs" / "main"
    if ref.is_file():
        pinned = repo / "snapshots" / ref.read_text(encoding="utf-8").strip()
        if (pinned / MODEL_INDEX).is_file():
            return pinned
    snapshots = [s for s in _sorted_children(repo / "snapshots") if (s / MODEL_INDEX).is_file()]
    if not snapshots:
        return None
    return max(snapshots, key=lambda s: (s / MODEL_INDEX).stat().st_mtime)


def _sorted_children(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:  # missing or unreadable folder: simply no models there
        return []


def _info(name: str, path: Path, source: ModelSource) -> ModelInfo:
    return ModelInfo(name=name, path=path, source=source, pipeline_class=_pipeline_class(path))


def _pipeline_class(path: Path) -> str:
    try:
        index = json.loads((path / MODEL_INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    return str(index.get("_class_name", "")) if isinstance(index, dict) else ""
