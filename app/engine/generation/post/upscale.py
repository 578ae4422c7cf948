"""Upscaling with a model (spandrel), tile by tile, stoppable between tiles.

Imports torch and spandrel: worker processes only (and the command line's deep check).

A file is read as plain weights only: safetensors, or `.pth`/`.pt` through
`torch.load(weights_only=True)` (never arbitrary unpickling; spandrel's own `.pth` reader
unpickles with a restricted unpickler instead, so Easel does not use it). spandrel then
detects the architecture from the weights and builds the model; anything that is not a
super-resolution model is refused in one sentence (`NotAnUpscaler`).

The image goes through the model in tiles: each tile is a core of `tile` pixels plus
`pad` pixels of its neighbours as context, and only the core of the output is kept, so
tiles never blend and a model whose receptive field is within `pad` gives the same image
as one pass over the whole picture (an image within one tile is exactly spandrel's own
result). Between tiles the caller decides: go on, save progress (the upscaled tiles so far),
stop for a pause, or cancel; a resumed run continues at the tile where it stopped.
"""

from __future__ import annotations

import importlib
import io
import math
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from app.durable import atomic_write
from app.engine.generation.errors import CheckpointCorrupt
from app.engine.generation.loop.checkpoint import check_params
from app.engine.generation.post.upscalers import (
    SAFETENSORS,
    WEIGHTS_ONLY_SUFFIXES,
    NotAnUpscaler,
    check_upscaler_file,
)
from app.engine.jobs.params import GenerationParams

DEFAULT_TILE = 256  # input pixels per tile side (a tile's output is tile * scale)
DEFAULT_PAD = 16  # context around each tile, in input pixels
FORMAT = "easel-upscale-1"

# What to do after a tile: its number (1..n), the count, and the output so far.
TileCallback = Callable[[int, int], str]
CONTINUE, SAVE, PAUSE, CANCEL = "continue", "save", "pause", "cancel"


class UpscaleStopped(Exception):
    """The caller stopped the upscale between tiles (`PAUSE` or `CANCEL`)."""

    def __init__(self, decision: str, done: int) -> None:
        super().__init__(decision)
        self.decision = decision
        self.done = done


def _spandrel() -> types.ModuleType:
    """Import spandrel. Two of its architectures that are no upscalers (LaMa inpainting,
    RestoreFormer faces) import torchvision at import time; where torchvision is missing
    (it is not a dependency of Easel), they get a stand-in for the two functions they
    import, which raises if they are ever used, and the stand-in is removed again at once,
    so nothing else in the process sees a torchvision that is not there."""
    if "spandrel" in sys.modules:
        return sys.modules["spandrel"]
    try:
        importlib.import_module("torchvision.transforms.functional")
    except Exception:  # missing, or a build for another torch that fails as it loads
        _forget_torchvision()
    else:
        return importlib.import_module("spandrel")
    stand_ins = _torchvision_stand_ins()
    sys.modules.update(stand_ins)
    try:
        return importlib.import_module("spandrel")
    finally:
        _forget_torchvision()


def _forget_torchvision() -> None:
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]


def _torchvision_stand_ins() -> dict[str, types.ModuleType]:
    def unavailable(*_args: object, **_kwargs: object) -> None:
        raise NotAnUpscaler("this model needs torchvision, which Easel does not install")

    functional = types.ModuleType("torchvision.transforms.functional")
    functional.rotate = unavailable  # type: ignore[attr-defined]
    functional.normalize = unavailable  # type: ignore[attr-defined]
    functional.InterpolationMode = type("InterpolationMode", (), {})  # type: ignore[attr-defined]
    transforms = types.ModuleType("torchvision.transforms")
    transforms.functional = functional  # type: ignore[attr-defined]
    root = types.ModuleType("torchvision")
    root.transforms = transforms  # type: ignore[attr-defined]
    return {
        "torchvision": root,
        "torchvision.transforms": transforms,
        "torchvision.transforms.functional": functional,
    }


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """The file's tensors: safetensors, or a torch archive through `weights_only=True`."""
    check_upscaler_file(path)
    suffix = path.suffix.lower()
    if suffix == SAFETENSORS:
        from safetensors.torch import load_file

        return load_file(str(path), device="cpu")
    assert suffix in WEIGHTS_ONLY_SUFFIXES
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # an UnpicklingError names what it refused to build
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise NotAnUpscaler(
            f"{path.name} holds more than plain weights, so it is not read ({first[:200]})"
        ) from None
    if not isinstance(loaded, dict):
        raise NotAnUpscaler(f"{path.name} holds a {type(loaded).__name__}, not model weights")
    return loaded


@dataclass(frozen=True)
class Upscaler:
    path: Path
    model: Any  # spandrel's ImageModelDescriptor
    scale: int
    architecture: str


@cache
def _loaded(path: Path, mtime_ns: int) -> Upscaler:
    spandrel = _spandrel()
    weights = spandrel.canonicalize_state_dict(read_weights(path))
    try:
        model = spandrel.ModelLoader().load_from_state_dict(weights)
    except spandrel.UnsupportedModelError:
        raise NotAnUpscaler(
            f"{path.name} is not a model spandrel knows (no upscaler architecture matches it)"
        ) from None
    except (KeyError, RuntimeError, ValueError) as error:
        raise NotAnUpscaler(f"{path.name} could not be built as an upscaler: {error}") from None
    if not isinstance(model, spandrel.ImageModelDescriptor) or model.scale < 2:
        raise NotAnUpscaler(
            f"{path.name} is a {model.architecture.name} model for "
            f"{getattr(model, 'purpose', 'other work')}, not an upscaler"
        )
    return Upscaler(path, model.eval(), int(model.scale), model.architecture.name)


def load_upscaler(path: Path) -> Upscaler:
    """The model in `path`, loaded once per file version; `NotAnUpscaler` otherwise."""
    return _loaded(path, path.stat().st_mtime_ns)


def to_tensor(image: Image.Image) -> torch.Tensor:
    pixels = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(pixels).permute(2, 0, 1).unsqueeze(0).contiguous()


def to_image(tensor: torch.Tensor) -> Image.Image:
    pixels = (tensor[0].clamp(0, 1).permute(1, 2, 0).numpy() * 255.0).round().astype(np.uint8)
    return Image.fromarray(pixels, "RGB")


@dataclass(frozen=True)
class Tile:
    core: tuple[int, int, int, int]  # x0, y0, x1, y1 in input pixels
    context: tuple[int, int, int, int]  # the core and its neighbours' pixels around it


def tiles_of(
    width: int, height: int, tile: int = DEFAULT_TILE, pad: int = DEFAULT_PAD
) -> list[Tile]:
    """The tiles of an image, row by row."""
    cols, rows = math.ceil(width / tile), math.ceil(height / tile)
    out = []
    for row in range(rows):
        for col in range(cols):
            x0, y0 = col * tile, row * tile
            x1, y1 = min(x0 + tile, width), min(y0 + tile, height)
            context = (
                max(0, x0 - pad),
                max(0, y0 - pad),
                min(width, x1 + pad),
                min(height, y1 + pad),
            )
            out.append(Tile((x0, y0, x1, y1), context))
    return out


@torch.inference_mode()
def upscale_tiles(
    upscaler: Upscaler,
    image: Image.Image,
    *,
    tile: int = DEFAULT_TILE,
    pad: int = DEFAULT_PAD,
    output: torch.Tensor | None = None,
    done: int = 0,
    after_tile: Callable[[int, int, torch.Tensor], str] | None = None,
) -> torch.Tensor:
    """`image` upscaled by the model, tile by tile, from tile `done` on (with `output` the
    tiles already made). `after_tile(k, n, output)` may answer PAUSE or CANCEL: then
    `UpscaleStopped` is raised with the tiles done."""
    source = to_tensor(image)
    scale = upscaler.scale
    _, _, height, width = source.shape
    if output is None:
        output = torch.zeros((1, 3, height * scale, width * scale), dtype=torch.float32)
    grid = tiles_of(width, height, tile, pad)
    for index in range(done, len(grid)):
        (x0, y0, x1, y1), (cx0, cy0, cx1, cy1) = grid[index].core, grid[index].context
        result = upscaler.model(source[..., cy0:cy1, cx0:cx1])
        oy, ox = (y0 - cy0) * scale, (x0 - cx0) * scale
        core = result[..., oy : oy + (y1 - y0) * scale, ox : ox + (x1 - x0) * scale]
        output[..., y0 * scale : y1 * scale, x0 * scale : x1 * scale] = core
        decision = after_tile(index + 1, len(grid), output) if after_tile else CONTINUE
        if decision in (PAUSE, CANCEL):
            raise UpscaleStopped(decision, index + 1)
    return output


def upscale_png(upscaler: Upscaler, png: bytes, size: tuple[int, int] | None = None) -> Image.Image:
    """A whole image through the model in one go (tiled; no stops), resized (Lanczos) to
    `size` if given: hires fix's first half."""
    with Image.open(io.BytesIO(png)) as image:
        upscaled = to_image(upscale_tiles(upscaler, image))
    if size is not None and upscaled.size != size:
        upscaled = upscaled.resize(size, Image.Resampling.LANCZOS)
    return upscaled


# --- progress between tiles, for pause and crash-resume ----------------------------------------


def save_progress(path: Path, params: GenerationParams, done: int, output: torch.Tensor) -> None:
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, "params": params.to_dict(), "done": done,
                "output": output.clone()}, buffer)  # fmt: skip
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()))


def load_progress(path: Path, params: GenerationParams) -> tuple[int, torch.Tensor] | None:
    """(tiles done, output so far) saved for these params; None if there is none.
    `CheckpointCorrupt` or `CheckpointMismatch` for a file that cannot be resumed."""
    if not path.is_file():
        return None
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise CheckpointCorrupt(f"upscale progress {path.name} cannot be read: {error}") from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise CheckpointCorrupt(f"{path.name} is not an upscale's saved progress")
    check_params(saved["params"], params)
    return int(saved["done"]), saved["output"]
