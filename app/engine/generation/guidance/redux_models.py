"""Flux.1 Redux models: found in `<models folder>/redux/`, as diffusers folders.

Torch-free. A Redux model turns a reference image into extra T5-space tokens for Flux.1
(families/flux/redux.py). It is the folder black-forest-labs/FLUX.1-Redux-dev ships: a
SigLIP vision encoder (`image_encoder/`), its image processor (`feature_extractor/`) and
the projection into T5's width (`image_embedder/`, diffusers' `ReduxImageEncoder`), with
a `model_index.json` naming `FluxPriorReduxPipeline`. Named by its folder's name. (ComfyUI's
single `style_models/flux1-redux-dev.safetensors`, paired with a SigLIP in `clip_vision/`,
is another layout, not read.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.engine.generation.files.sources import ModelSearchPath, default_search_path
from app.engine.paths import stays_inside
from app.errors import MissingModel

REDUX_SUBFOLDER = "redux"
REDUX_PIPELINE = "FluxPriorReduxPipeline"
REDUX_PARTS = ("image_encoder", "feature_extractor", "image_embedder")
REDUX_LAYOUT = (
    "a diffusers folder with image_encoder, feature_extractor and image_embedder, "
    "e.g. a copy of black-forest-labs/FLUX.1-Redux-dev"
)


class ReduxNotFound(MissingModel):
    """No usable Redux model of that name; the message says where it looked or why not."""


@dataclass(frozen=True)
class ReduxInfo:
    name: str
    path: Path  # the diffusers folder


def redux_folders(search: ModelSearchPath | None = None) -> list[Path]:
    search = search or default_search_path()
    return [folder / REDUX_SUBFOLDER for folder in search.user]


def is_redux_folder(folder: Path) -> bool:
    """A `FluxPriorReduxPipeline` folder with the three parts Redux runs with."""
    try:
        index = json.loads((folder / "model_index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    named = isinstance(index, dict) and index.get("_class_name") == REDUX_PIPELINE
    return named and all((folder / part).is_dir() for part in REDUX_PARTS)


def list_redux_models(folders: Sequence[Path] | None = None) -> list[ReduxInfo]:
    found: dict[str, ReduxInfo] = {}
    for folder in redux_folders() if folders is None else folders:
        for candidate in _subfolders(folder):
            if is_redux_folder(candidate):
                found.setdefault(candidate.name, ReduxInfo(candidate.name, candidate))
    return list(found.values())


def find_redux_model(
    name: str, folders: Sequence[Path] | None = None, *, names_only: bool = False
) -> ReduxInfo:
    """The Redux model called `name`; `names_only` (a request from the network): inside
    `folders`, links followed, and refusals that name no folder."""
    searched = redux_folders() if folders is None else list(folders)
    for info in list_redux_models(searched):
        if info.name == name and (not names_only or stays_inside(info.path, searched)):
            return info
    where = "" if names_only else f" (looked in: {', '.join(map(str, searched)) or 'no folders'})"
    raise ReduxNotFound(
        f"reference images on Flux.1 need a Redux model ({REDUX_LAYOUT}, in the models "
        f"folder's {REDUX_SUBFOLDER}/), and {name!r} is not one of the installed ones{where}"
    )


def _subfolders(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []
