"""Tiled upscale, as Ultimate SD Upscale does it: upscale, then img2img tile by tile.

The image is first enlarged to the job's size (through an upscaler model, or Lanczos).
Then regions of the model's native size are redrawn with img2img one after another, each
from the image as the regions before it left it, and pasted through a mask that fades over
the overlap with the regions before; so memory is one native-size region whatever the
result's size. A seam fix follows (USDU's "band pass"): a region centred on each place
where regions meet is redrawn at the seam-fix strength and pasted through a narrow band
that fades to both sides. Every region, tile or seam, is one step of the job: pause and a
crash resume at the region where it stopped, from the image saved after the one before
(a PNG: the state between regions is 8-bit pixels, so a resumed run is exact).
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from app.durable import atomic_write
from app.engine.generation import denoise
from app.engine.generation.errors import CheckpointCorrupt
from app.engine.generation.loop.checkpoint import check_params
from app.engine.jobs.params import INIT_UPLOADED, KIND_GENERATE, SIZE_MULTIPLE, GenerationParams

FORMAT = "easel-tiled-1"
OVERLAP_SHARE = 8  # regions overlap by 1/8 of their side
SEAM_STRENGTH = 0.35  # USDU's default denoise for the band-pass seam fix
SEAM_SHARE = 4  # the band is 1/4 of the region side wide


@dataclass(frozen=True)
class Region:
    box: tuple[int, int, int, int]  # x0, y0, x1, y1: always the model's native size
    mask: str  # "tile" (fade over the overlap on its left and top) or "vseam"/"hseam"
    # A tile: fades on its (left, top) edge; a seam: at its (start, end) along the seam.
    edges: tuple[bool, bool] = (False, False)


def starts(length: int, size: int, overlap: int) -> list[int]:
    """Where regions of `size` start along `length` so that they overlap by at least
    `overlap` and the last ends at the edge."""
    if length <= size:
        return [0]
    step = size - overlap
    count = -(-(length - size) // step) + 1
    return [round(i * (length - size) / (count - 1)) for i in range(count)]


def regions(width: int, height: int, size: int) -> list[Region]:
    """The tiles, row by row, then the seams (vertical, then horizontal)."""
    overlap = max(SIZE_MULTIPLE, size // OVERLAP_SHARE)
    xs, ys = starts(width, size, overlap), starts(height, size, overlap)
    out = [
        Region((x, y, x + size, y + size), "tile", (i > 0, j > 0))
        for j, y in enumerate(ys)
        for i, x in enumerate(xs)
    ]
    half = size // 2
    # A seam region fades in along its seam too, at the ends where another one goes on.
    for prev, x in itertools.pairwise(xs):  # vertical seams: where two columns meet
        seam = (prev + size + x) // 2
        left = min(max(seam - half, 0), width - size)
        out += [
            Region((left, y, left + size, y + size), "vseam", (j > 0, j < len(ys) - 1))
            for j, y in enumerate(ys)
        ]
    for prev, y in itertools.pairwise(ys):
        seam = (prev + size + y) // 2
        top = min(max(seam - half, 0), height - size)
        out += [
            Region((x, top, x + size, top + size), "hseam", (i > 0, i < len(xs) - 1))
            for i, x in enumerate(xs)
        ]
    return out


def region_mask(region: Region, size: int, overlap: int, seam_at: int = -1) -> np.ndarray:
    """How much of the redrawn region replaces the image, per pixel (0..1)."""
    ramp = np.ones(size, dtype=np.float32)
    if region.mask == "tile":  # fades in over the overlap with the tiles before it
        fade = np.clip((np.arange(size, dtype=np.float32) + 0.5) / overlap, 0.0, 1.0)
        horizontal = fade if region.edges[0] else ramp
        vertical = fade if region.edges[1] else ramp
        return np.outer(vertical, horizontal)
    band = max(SIZE_MULTIPLE, size // SEAM_SHARE)
    centre = seam_at if seam_at >= 0 else size // 2
    distance = np.abs(np.arange(size, dtype=np.float32) + 0.5 - centre)
    across = np.clip(1.0 - distance / (band / 2), 0.0, 1.0)  # the band over the seam
    position = np.arange(size, dtype=np.float32) + 0.5
    along = np.ones(size, dtype=np.float32)  # along the seam: fades where another goes on
    if region.edges[0]:
        along = np.minimum(along, np.clip(position / overlap, 0.0, 1.0))
    if region.edges[1]:
        along = np.minimum(along, np.clip((size - position) / overlap, 0.0, 1.0))
    if region.mask == "vseam":
        return np.outer(along, across)
    return np.outer(across, along)


Redraw = Callable[[Image.Image, GenerationParams], Image.Image]


def redraw_with(pipe: object) -> Redraw:
    """img2img of one region on `pipe`, in the step-wise loop (the same arithmetic as the
    stock img2img pipeline; see `img2img`)."""

    def redraw(image: Image.Image, params: GenerationParams) -> Image.Image:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        state = denoise.start(pipe, params, buffer.getvalue())
        while not state.finished:
            denoise.advance(pipe, state)
        return denoise.decode(pipe, state)

    return redraw


def region_params(params: GenerationParams, size: int, index: int, seam: bool) -> GenerationParams:
    """One region's img2img: the job's prompt and settings at the native size; each region
    its own seed (the job's seed + its index), so no two regions draw the same noise."""
    return replace(
        params, kind=KIND_GENERATE, width=size, height=size, upscaler="",
        init_image=f"{INIT_UPLOADED}region", seed=(params.seed + index) % 2**32,
        strength=SEAM_STRENGTH if seam else params.strength, variation_strength=0.0,
    )  # fmt: skip


def redraw_region(
    image: Image.Image,
    region: Region,
    index: int,
    params: GenerationParams,
    size: int,
    redraw: Redraw,
    regions_all: list[Region],
) -> Image.Image:
    """`image` with `region` redrawn and pasted through its mask (in place)."""
    x0, y0, _x1, _y1 = region.box
    crop = image.crop(region.box)
    seam = region.mask != "tile"
    drawn = redraw(crop, region_params(params, size, index, seam))
    overlap = max(SIZE_MULTIPLE, size // OVERLAP_SHARE)
    seam_at = _seam_position(region, regions_all, size) if seam else -1
    mask = region_mask(region, size, overlap, seam_at)[..., None]
    base = np.asarray(crop, dtype=np.float32)  # only the region: memory and time stay a
    patch = np.asarray(drawn.convert("RGB"), dtype=np.float32)  # region's, whatever the size
    mixed = base * (1.0 - mask) + patch * mask
    out = image.copy() if image.readonly else image
    out.paste(Image.fromarray(np.clip(np.rint(mixed), 0, 255).astype(np.uint8), "RGB"), (x0, y0))
    return out


def _seam_position(region: Region, every: list[Region], size: int) -> int:
    """Where the seam lies inside a seam region: the middle of the overlap it covers."""
    tiles = [r for r in every if r.mask == "tile"]
    x0, y0, _x1, _y1 = region.box
    if region.mask == "vseam":
        xs = sorted({t.box[0] for t in tiles})
        seams = [(a + size + b) // 2 for a, b in itertools.pairwise(xs)]
        near = min(seams, key=lambda s: abs(s - (x0 + size // 2)))
        return near - x0
    ys = sorted({t.box[1] for t in tiles})
    seams = [(a + size + b) // 2 for a, b in itertools.pairwise(ys)]
    near = min(seams, key=lambda s: abs(s - (y0 + size // 2)))
    return near - y0


# --- progress between regions ------------------------------------------------------------------


def save_progress(path: Path, params: GenerationParams, done: int, image: Image.Image) -> None:
    png = io.BytesIO()
    image.save(png, format="PNG")
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, "params": params.to_dict(), "done": done,
                "image": torch.frombuffer(bytearray(png.getvalue()), dtype=torch.uint8)},
               buffer)  # fmt: skip
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()))


def load_progress(path: Path, params: GenerationParams) -> tuple[int, Image.Image] | None:
    if not path.is_file():
        return None
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(saved, dict) or saved.get("format") != FORMAT:
            raise ValueError("not a tiled upscale's saved progress")
        check_params(saved["params"], params)
        with Image.open(io.BytesIO(saved["image"].numpy().tobytes())) as image:
            return int(saved["done"]), image.convert("RGB")
    except (OSError, ValueError, RuntimeError, KeyError) as error:
        raise CheckpointCorrupt(f"tiled upscale progress {path.name}: {error}") from None
