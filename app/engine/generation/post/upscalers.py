"""Upscaler model files: where they are and whether a file is one (files only: no torch).

Upscalers live in `upscale_models/` inside each of the user's model folders (as LoRAs live
in `lora/`), named by file name with or without the suffix. They are loaded with spandrel in
the worker (`generation.upscale`): safetensors, or `.pth`/`.pt` through torch's
`weights_only=True`, never arbitrary unpickling.

At submit the window and the command line check a file without torch: a safetensors
header must show the layers of an architecture spandrel reads as a super-resolution model
(ESRGAN in its original or BasicSR layout, Real-ESRGAN's compact SRVGGNet, SwinIR, HAT,
DAT, OmniSR, SPAN, ...); a `.pth` must be a torch zip archive. The worker then loads it with
spandrel, which refuses anything else in one sentence (a failure, not retried).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Sequence
from pathlib import Path

from app.engine.generation.files.architecture import read_safetensors_header
from app.engine.generation.files.sources import ModelSearchPath, default_search_path
from app.engine.paths import is_inside
from app.errors import BadInput

UPSCALER_SUBFOLDER = "upscale_models"
SAFETENSORS = ".safetensors"
WEIGHTS_ONLY_SUFFIXES = (".pth", ".pt")
SUFFIXES = (SAFETENSORS, *WEIGHTS_ONLY_SUFFIXES)
# Keys by which an architecture spandrel loads as an upscaler shows itself (after its
# "params_ema."/"params."/"module." prefixes, which spandrel strips too).
_SIGNATURES = (
    re.compile(r"^model\.1\.sub\.\d+\.RDB1\.conv1\.0\.weight$"),  # ESRGAN, original layout
    re.compile(r"^body\.\d+\.rdb1\.conv1\.weight$"),  # ESRGAN / Real-ESRGAN, BasicSR layout
    re.compile(r"^body\.\d+\.weight$"),  # Real-ESRGAN compact (SRVGGNetCompact)
    re.compile(r"^layers\.0\.residual_group\.blocks\.0\.attn\.relative_position_bias_table$"),
    re.compile(r"^layers\.0\.residual_group\.blocks\.0\.conv_block\.cab\.0\.weight$"),  # HAT
    re.compile(r"^layers\.0\.blocks\.0\.attn\.qkv\.weight$"),  # DAT
    re.compile(r"^residual_layer\.0\.residual_layer\.0\.layer\.0\.fn\.0\.weight$"),  # OmniSR
    re.compile(r"^block_1\.c1_r\.sk\.weight$"),  # SPAN
)
_PREFIXES = ("params_ema.", "params.", "module.", "model.module.")


class UpscalerError(BadInput):
    """An upscaler that cannot be used; the message names the file."""


class UpscalerNotFound(UpscalerError):
    pass


class NotAnUpscaler(UpscalerError):
    pass


def upscaler_folders(search: ModelSearchPath | None = None) -> list[Path]:
    search = search or default_search_path()
    return [folder / UPSCALER_SUBFOLDER for folder in search.user]


def available_upscalers(folders: Sequence[Path]) -> dict[str, Path]:
    """name (file name without suffix) -> file, for every upscaler file in `folders`."""
    found: dict[str, Path] = {}
    for folder in folders:
        try:
            files = sorted(p for p in folder.iterdir() if p.is_file())
        except OSError:
            continue
        for path in files:
            if path.suffix.lower() in SUFFIXES:
                found.setdefault(path.stem, path)
    return found


def resolve_upscaler(name: str, folders: Sequence[Path], *, names_only: bool = False) -> Path:
    """The file of upscaler `name` (its file name, with or without the suffix); never a
    path. `names_only` (a request from the network): the file inside `folders`, links
    followed, and a refusal that names no folder."""
    files = available_upscalers(folders)
    plain = Path(name).name == name and name not in ("", ".", "..")  # no folder in it
    path = (files.get(name) or files.get(Path(name).stem)) if plain else None
    if names_only and (path is None or not is_inside(path, folders)):
        raise UpscalerNotFound(f"upscaler {name!r} is not one of the installed upscalers")
    if path is None or (Path(name).suffix and path.name != name):
        where = ", ".join(str(f) for f in folders) or "no folder"
        known = ", ".join(sorted(files)) or "none"
        raise UpscalerNotFound(f"upscaler {name!r} was not found in {where} (there: {known})")
    return path


def check_upscaler_file(path: Path) -> None:
    """Refuse, in one sentence naming the file, what cannot be an upscaler (no torch)."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise NotAnUpscaler(
            f"{path.name} is not an upscaler file: only {', '.join(SUFFIXES)} are read"
        )
    if suffix in WEIGHTS_ONLY_SUFFIXES:
        if not zipfile.is_zipfile(path):
            raise NotAnUpscaler(
                f"{path.name} is not a torch weights archive, so it cannot be read safely"
            )
        return
    try:
        header = read_safetensors_header(path)
    except ValueError as error:
        raise NotAnUpscaler(f"{path.name} cannot be read: {error}") from None
    keys = [_stripped(key) for key in header if key != "__metadata__"]
    if not any(sig.match(key) for key in keys for sig in _SIGNATURES):
        raise NotAnUpscaler(
            f"{path.name} is not an upscaler model (none of the layers of ESRGAN, "
            "Real-ESRGAN, SwinIR, HAT, DAT, OmniSR or SPAN are in it)"
        )


def check_upscaler(
    name: str, search: ModelSearchPath | None = None, *, names_only: bool = False
) -> Path:
    """The upscaler's file, if it is one (files only); else a one-sentence `UpscalerError`."""
    path = resolve_upscaler(name, upscaler_folders(search), names_only=names_only)
    check_upscaler_file(path)
    return path


def _stripped(key: str) -> str:
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key
