"""Flux.1 Redux models: found in `<models folder>/redux/` as diffusers folders, and in
`<models folder>/style_models/` as ComfyUI's file.

Torch-free. A Redux model turns a reference image into extra T5-space tokens for Flux.1
(families/flux/redux.py). It is the folder black-forest-labs/FLUX.1-Redux-dev ships: a
SigLIP vision encoder (`image_encoder/`), its image processor (`feature_extractor/`) and
the projection into T5's width (`image_embedder/`, diffusers' `ReduxImageEncoder`), with
a `model_index.json` naming `FluxPriorReduxPipeline`. Named by its folder's name.

Or ComfyUI's layout: the projection alone as `style_models/flux1-redux-dev.safetensors`
(`redux_up.` and `redux_down.`, diffusers' own names), its SigLIP vision encoder in
`clip_vision/` (`sigclip_vision_patch14_384.safetensors`, transformers' `vision_model.`
keys), paired by width from their headers; named by the file's name. The configs and the
image processor settings are shipped (resources/model_configs/flux1-redux-dev: those of the
released folder); a file without a SigLIP that fits is refused in one sentence.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.engine.generation.files.safetensors_header import read_safetensors_header
from app.engine.generation.files.sources import ModelSearchPath, default_search_path
from app.engine.paths import resources_dir, stays_inside
from app.errors import MissingModel

REDUX_SUBFOLDER = "redux"
STYLE_MODELS = "style_models"  # ComfyUI's folder of Redux files
CLIP_VISION = "clip_vision"  # ... and of the vision encoders beside them
CONFIG_NAME = "flux1-redux-dev"  # the shipped config folder a Redux file loads with
_UP = "redux_up.weight"  # (3 x T5 width, SigLIP width)
# A SigLIP vision tower's patches, in the released files' keys or transformers 5's (no
# `vision_model.`); CLIP's tower has a class embedding SigLIP's lacks.
_SIGLIP_PATCHES = (
    "vision_model.embeddings.patch_embedding.weight",
    "embeddings.patch_embedding.weight",
)
_CLIP_CLASS = ("vision_model.embeddings.class_embedding", "embeddings.class_embedding")
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
    path: Path  # the diffusers folder, or ComfyUI's Redux file
    image_encoder: Path | None = None  # a file's SigLIP (clip_vision/)
    config: Path | None = None  # a file's config folder (the shipped flux1-redux-dev)
    problem: str = ""  # why a file cannot be used (no SigLIP that fits), or ""

    @property
    def is_file(self) -> bool:
        return self.path.is_file()


def redux_folders(search: ModelSearchPath | None = None) -> list[Path]:
    search = search or default_search_path()
    return [folder / name for folder in search.user for name in (REDUX_SUBFOLDER, STYLE_MODELS)]


def bundled_redux_config() -> Path:
    return resources_dir() / "model_configs" / CONFIG_NAME


def is_redux_folder(folder: Path) -> bool:
    """A `FluxPriorReduxPipeline` folder with the three parts Redux runs with."""
    try:
        index = json.loads((folder / "model_index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    named = isinstance(index, dict) and index.get("_class_name") == REDUX_PIPELINE
    return named and all((folder / part).is_dir() for part in REDUX_PARTS)


def list_redux_models(
    folders: Sequence[Path] | None = None, config: Path | None = None
) -> list[ReduxInfo]:
    """Every Redux folder and file in `folders`; a file's `config`: the shipped one unless
    given (tests)."""
    found: dict[str, ReduxInfo] = {}
    for folder in redux_folders() if folders is None else folders:
        for candidate in _subfolders(folder):
            if is_redux_folder(candidate):
                found.setdefault(candidate.name, ReduxInfo(candidate.name, candidate))
        for file in _safetensors(folder):
            info = redux_file(file, config or bundled_redux_config())
            if info is not None:
                found.setdefault(info.name, info)
    return list(found.values())


def redux_file(path: Path, config: Path) -> ReduxInfo | None:
    """ComfyUI's Redux file at `path` with the SigLIP paired with it, or None if `path` is
    no Redux file (its header has no `redux_up`)."""
    up = _shapes(path).get(_UP)
    if not up or len(up) != 2:
        return None
    width = up[1]
    vision = path.parent.parent / CLIP_VISION
    encoders = [file for file in _safetensors(vision) if _siglip_width(file) == width]
    if encoders:
        return ReduxInfo(path.stem, path, encoders[0], config)
    problem = (
        f"Redux model {path.stem!r} needs its SigLIP vision encoder beside it: put "
        f"sigclip_vision_patch14_384.safetensors (a SigLIP {width} wide) in the models "
        f"folder's {CLIP_VISION}/"
    )
    return ReduxInfo(path.stem, path, None, config, problem)


def find_redux_model(
    name: str,
    folders: Sequence[Path] | None = None,
    *,
    names_only: bool = False,
    config: Path | None = None,
) -> ReduxInfo:
    """The Redux model called `name`; `names_only` (a request from the network): inside
    `folders`, links followed, and refusals that name no folder."""
    searched = redux_folders() if folders is None else list(folders)
    for info in list_redux_models(searched, config):
        if info.name == name and (not names_only or stays_inside(info.path, searched)):
            if info.problem:
                raise ReduxNotFound(info.problem)
            return info
    where = "" if names_only else f" (looked in: {', '.join(map(str, searched)) or 'no folders'})"
    raise ReduxNotFound(
        f"reference images on Flux.1 need a Redux model ({REDUX_LAYOUT}, in the models "
        f"folder's {REDUX_SUBFOLDER}/, or ComfyUI's flux1-redux-dev.safetensors in "
        f"{STYLE_MODELS}/), and {name!r} is not one of the installed ones{where}"
    )


def _siglip_width(path: Path) -> int:
    """The hidden width of a SigLIP vision encoder file (0: not one; CLIP's has a class
    embedding SigLIP lacks)."""
    shapes = _shapes(path)
    patches = next((shapes[key] for key in _SIGLIP_PATCHES if key in shapes), None)
    if not patches or any(key in shapes for key in _CLIP_CLASS):
        return 0
    return patches[0]


def _shapes(path: Path) -> dict[str, list[int]]:
    try:
        header = read_safetensors_header(path)
    except ValueError:
        return {}
    return {k: v.get("shape", []) for k, v in header.items() if isinstance(v, dict)}


def _safetensors(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix.lower() == ".safetensors")
    except OSError:
        return []


def _subfolders(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []
