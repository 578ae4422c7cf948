"""Where generation models come from: bundled, the user's models folder, the HF cache.

Pure filesystem (no torch, no network) so the GUI can list models cheaply. A model is a
diffusers pipeline folder (a folder holding `model_index.json`) or, in the user's models
folder and its `checkpoints/` subfolder, a single checkpoint file (`.safetensors`; pickle
files are listed as unsupported, with the reason); Flux.1 / SD 3.5 diffusion models also
in `diffusion_models/` or `unet/` (ComfyUI's split layout, `.safetensors` or `.gguf`), with
the text encoders and VAE transformer_files.py pairs them with. Each model carries its architecture,
native size and size presets, or the reason it cannot be used.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from app.engine.generation.files.architecture import (
    MODEL_INDEX,
    PICKLE_SUFFIXES,
    SAFETENSORS_SUFFIX,
    Architecture,
    Detected,
    Part,
    Prediction,
    detect_folder,
    size_presets,
    size_problem,
    unsupported,
)
from app.engine.generation.files.expert_files import detect_paired, is_low_noise_expert
from app.engine.generation.files.transformer_files import DIFFUSION_MODEL_FOLDERS, GGUF_SUFFIX
from app.engine.paths import bundled_models_dir, looks_like_path, models_dir, stays_inside
from app.errors import MissingModel

log = logging.getLogger(__name__)

CHECKPOINTS_SUBFOLDER = (
    "checkpoints"  # A1111's "Stable-diffusion" folder; files at the top work too
)
LORA_SUBFOLDER = "lora"
_CHECKPOINT_SUFFIXES = (SAFETENSORS_SUFFIX, GGUF_SUFFIX, *PICKLE_SUFFIXES)
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
    architecture: Architecture | None = None
    prediction: Prediction = Prediction.EPSILON
    native_size: int = 0  # pixels per side the model was trained at (0: unknown)
    unsupported_reason: str = ""  # set exactly when the model cannot be used, and why
    inpainting: bool = False  # an inpainting checkpoint (9-channel UNet): used with a mask
    config_name: str = ""  # Flux / SD 3.x files: the shipped config folder they load with
    parts: tuple[Part, ...] = ()  # Flux / SD 3.x files: where each component's weights are
    quantisation: str = ""  # a quantised diffusion model: "Q8_0" (GGUF), "fp8", ...

    @property
    def is_single_file(self) -> bool:
        return self.path.is_file()

    @property
    def supported(self) -> bool:
        return self.architecture is not None and not self.unsupported_reason

    @property
    def kind(self) -> str:
        """The architecture and its variant: "SDXL", "SD 2.x v-prediction" ("" if unknown)."""
        if self.architecture is None:
            return ""
        kind = self.architecture.label
        if self.prediction is Prediction.V:
            kind += " v-prediction"
        if self.inpainting:
            kind += " inpainting"
        return kind

    @property
    def label(self) -> str:
        """What the picker shows next to the name, e.g. "SDXL, 1024 px", "Flux.1, 1024 px,
        Q8_0" or "unsupported"."""
        if not self.supported:
            return "unsupported"
        if self.quantisation:
            return f"{self.kind}, {self.native_size} px, {self.quantisation}"
        return f"{self.kind}, {self.native_size} px"

    @property
    def files(self) -> tuple[Path, ...]:
        """The files its weights are in: its own, and the split parts it was paired with."""
        return tuple(dict.fromkeys([self.path, *(part.path for part in self.parts)]))

    def size_problem(self, width: int, height: int) -> str:
        """Why this size does not suit this model ("" when it does); for submit-time checks."""
        return size_problem(self.native_size, width, height)

    @property
    def size_presets(self) -> tuple[tuple[int, int], ...]:
        """(width, height) choices for this model, its native square first."""
        return size_presets(self.native_size)


class ModelNotFound(MissingModel):
    """No model of that name; the message names the model and every place searched."""

    def __init__(self, name: str, searched: Sequence[Path]) -> None:
        places = ", ".join(str(p) for p in searched) or "(no model folders)"
        super().__init__(f"model {name!r} was not found; looked in: {places}")
        self.name = name
        self.searched = tuple(searched)


class ModelNotInstalled(MissingModel):
    """A name from the network (or a shared queue) that is not one of the installed models.

    The same sentence for a path, a missing name and a file a link takes outside the model
    folders: a client learns nothing about the server's disk from it."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"model {name!r} is not one of the installed models; GET /api/v1/models lists them"
        )
        self.name = name


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


def disk_bytes(path: Path) -> int:
    """How much disk a model takes: its file, or every file in its folder (links followed,
    each file counted once: the Hugging Face cache links its snapshots to shared blobs)."""
    try:
        if path.is_file():
            return path.stat().st_size
        seen: set[Path] = set()
        total = 0
        for item in path.rglob("*"):
            target = item.resolve()
            if target not in seen and target.is_file():
                seen.add(target)
                total += target.stat().st_size
        return total
    except OSError:
        return 0


def resolve_model(name: str, search: ModelSearchPath | None = None) -> ModelInfo:
    """The model called `name` (or a pipeline folder given by path), else `ModelNotFound`."""
    search = search or default_search_path()
    for info in _scan(search):
        if info.name == name:
            return info
    direct = Path(name).expanduser()
    if direct.is_absolute() and (direct / MODEL_INDEX).is_file():
        return _info(direct.name, direct, ModelSource.USER)
    if direct.is_absolute() and direct.is_file():
        return _file_info(direct, ModelSource.USER)
    raise ModelNotFound(name, search.all_folders())


def resolve_model_name(name: str, search: ModelSearchPath | None = None) -> ModelInfo:
    """The installed model called `name`, its files inside the model folders (links
    followed); never a path. For requests from the network and jobs on a shared queue."""
    search = search or default_search_path()
    if looks_like_path(name):
        raise ModelNotInstalled(name)
    for info in _scan(search):
        if info.name == name:
            if not inside_model_folders(info, search):
                raise ModelNotInstalled(name)
            return info
    raise ModelNotInstalled(name)


def inside_model_folders(info: ModelInfo, search: ModelSearchPath) -> bool:
    """Whether every file of the model lies inside the model folders, links followed: what
    the network may use and see (a link out is this machine's user's own affair). A link
    that loops or leads nowhere is listed as the unsupported file it is: nothing is read."""
    if info.unsupported_reason and not any(path.exists() for path in info.files):
        return True
    return all(stays_inside(path, search.all_folders()) for path in info.files)


def detected(info: ModelInfo) -> ModelInfo:
    """`info` with its architecture filled in, for a ModelInfo made by hand (tests, callers)."""
    if info.architecture is not None or info.unsupported_reason:
        return info
    if info.path.is_file():
        return _file_info(info.path, info.source, name=info.name)
    return _with_detection(info, detect_folder(info.path))


def _scan(search: ModelSearchPath) -> Iterator[ModelInfo]:
    for folder in search.bundled:
        yield from _pipeline_folders(folder, ModelSource.BUNDLED)
    for folder in search.user:
        yield from _pipeline_folders(folder, ModelSource.USER)
        yield from _checkpoint_files(folder, ModelSource.USER)
        yield from _checkpoint_files(folder / CHECKPOINTS_SUBFOLDER, ModelSource.USER)
        for split in DIFFUSION_MODEL_FOLDERS:  # ComfyUI's split layout (transformer_files.py)
            yield from _checkpoint_files(folder / split, ModelSource.USER)
    for folder in search.hf_caches:
        yield from _hf_cache_models(folder)


def _pipeline_folders(folder: Path, source: ModelSource) -> Iterator[ModelInfo]:
    for child in _sorted_children(folder):
        if (child / MODEL_INDEX).is_file():
            yield _info(child.name, child, source)


def _checkpoint_files(folder: Path, source: ModelSource) -> Iterator[ModelInfo]:
    try:
        files = sorted(p for p in folder.iterdir() if p.is_file() or _dangling(p))
    except OSError:
        return
    for path in files:
        # A Wan 2.2 A14B low-noise expert is listed as its high-noise twin's pair.
        if path.suffix.lower() in _CHECKPOINT_SUFFIXES and not is_low_noise_expert(path):
            yield _file_info(path, source)


def _dangling(path: Path) -> bool:
    """A symbolic link that loops or points nowhere: listed as unsupported, with why, rather
    than left out (the user put a file there and should learn why it is not offered)."""
    return path.is_symlink() and not path.exists()


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
    return _with_detection(
        ModelInfo(name=name, path=path, source=source, pipeline_class=_pipeline_class(path)),
        _guarded(detect_folder, path),
    )


def _file_info(path: Path, source: ModelSource, name: str = "") -> ModelInfo:
    """A checkpoint file is listed under its file name without the suffix, as A1111 does."""
    info = ModelInfo(name=name or path.stem, path=path, source=source)
    link_problem = _link_problem(path)
    if link_problem:
        return _with_detection(info, unsupported(f"{path.name} cannot be used: {link_problem}"))
    return _with_detection(info, _guarded(detect_paired, path))


def _link_problem(path: Path) -> str:
    """Why a symbolic link leads to no file ("" if it is no link or leads to one)."""
    if not path.is_symlink():
        return ""
    try:
        path.stat()
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "it is a symbolic link that leads back to itself (a loop)"
        return "it is a symbolic link to a file that is not there"
    return ""


def _guarded(detect: Callable[[Path], Detected], path: Path) -> Detected:
    """`detect(path)`, or an unsupported model naming the file if detection failed.

    The detectors turn every damage they know into a reason; this is the net under them,
    so that one file nobody foresaw never takes the listing (and with it every model, the
    window's picker and every A1111 request) down. The bug is logged with its traceback."""
    try:
        return detect(path)
    except Exception:  # one model's file must not hide the others
        log.exception("detecting the model %s failed", path)
        return unsupported(f"{path.name} cannot be used: its files could not be understood")


def _with_detection(info: ModelInfo, detected: Detected) -> ModelInfo:
    return replace(
        info,
        architecture=detected.architecture,
        prediction=detected.prediction,
        native_size=detected.native_size,
        unsupported_reason=detected.unsupported_reason,
        inpainting=detected.inpainting,
        config_name=detected.config_name,
        parts=detected.parts,
        quantisation=detected.quantisation,
    )


def _pipeline_class(path: Path) -> str:
    try:
        index = json.loads((path / MODEL_INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return ""
    return str(index.get("_class_name", "")) if isinstance(index, dict) else ""
