"""Inpaint masks: checked and converted once, at submit, with a clear message; outpaint's
extended canvas and its mask, made the same way.

PIL only (no torch), like `init_image`: the CLI and the GUI prepare a mask before it is
stored with its job (job_input, kind "mask"); the worker opens the stored bytes with
`open_mask`. A mask is a greyscale PNG of the image's size: white repaints, black keeps.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from PIL import Image, ImageFilter, UnidentifiedImageError

from app.engine.jobs.image_text import unreadable_reason
from app.engine.jobs.init_image import MAX_INIT_BYTES, MAX_INIT_PIXELS, open_rgb
from app.engine.jobs.params import MAX_SIZE, SIZE_MULTIPLE, InvalidParameters


class InvalidMask(InvalidParameters):
    """A mask that cannot be used; the message says what is wrong with it."""


def read_mask(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_INIT_BYTES:
            raise InvalidMask(f"the mask {path} is {size // 2**20} MB, too large for a mask")
        return path.read_bytes()
    except OSError as error:
        raise InvalidMask(f"cannot read the mask {path}: {error.strerror or error}") from error


def open_mask(data: bytes) -> Image.Image:
    """The mask in `data` as greyscale ("L"); a transparent pixel counts as black (kept)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            if image.width * image.height > MAX_INIT_PIXELS:
                raise InvalidMask(f"the mask is {image.width}x{image.height}, too large to load")
            image.load()
    except InvalidMask:
        raise  # our own sentence (too many pixels); it is a ValueError too
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        reason = unreadable_reason(error)  # PIL's own message quotes a Python object
        raise InvalidMask(f"the mask is not an image that can be read: {reason}") from error
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as error:
        raise InvalidMask(
            f"the mask is too large to load (more than {MAX_INIT_PIXELS // 1_000_000} megapixels)"
        ) from error
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        flat = Image.new("L", rgba.size, 0)
        flat.paste(rgba.convert("L"), mask=rgba.getchannel("A"))
        return flat
    return image.convert("L")


def prepare_mask(data: bytes, image_size: tuple[int, int]) -> bytes:
    """`data` as a greyscale PNG, refused unless it is an image of `image_size` that asks
    for something to be repainted."""
    mask = open_mask(data)
    if mask.size != image_size:
        raise InvalidMask(
            f"the mask is {mask.width}x{mask.height} but the image is "
            f"{image_size[0]}x{image_size[1]}; they must be the same size"
        )
    if mask.getextrema()[1] == 0:
        raise InvalidMask("the mask is empty (all black): it marks nothing to repaint")
    return png_bytes(mask)


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


# --- outpaint ---------------------------------------------------------------------------------


# An outpaint redraws all of the new area: it starts with nothing worth keeping.
OUTPAINT_STRENGTH = 1.0


class Fill(Enum):
    """What the new area of an outpaint holds before it is inpainted."""

    EDGE = "edge"  # the nearest edge pixel's colour, stretched outwards (then blurred)
    NOISE = "noise"  # random colours: the model invents everything


@dataclass(frozen=True)
class Extension:
    left: int = 0
    right: int = 0
    top: int = 0
    bottom: int = 0

    @property
    def any(self) -> bool:
        return any((self.left, self.right, self.top, self.bottom))


@dataclass(frozen=True)
class Outpaint:
    image_png: bytes  # RGB, the extended canvas
    mask_png: bytes  # "L", white over the new area
    width: int
    height: int


def outpaint(
    image_png: bytes, extension: Extension, fill: Fill, *, max_size: int = MAX_SIZE, seed: int = 0
) -> Outpaint:
    """The canvas of `image_png` grown by `extension`, the new area filled, and its mask."""
    sides = (extension.left, extension.right, extension.top, extension.bottom)
    if min(sides) < 0:
        raise InvalidMask("an outpaint cannot shrink the canvas: give 0 or more pixels per side")
    if not extension.any:
        raise InvalidMask("an outpaint needs at least one side to extend (nothing to paint)")
    if any(side % SIZE_MULTIPLE for side in sides):
        raise InvalidMask(f"outpaint sides must be multiples of {SIZE_MULTIPLE} pixels")
    image = open_rgb(image_png)
    width = image.width + extension.left + extension.right
    height = image.height + extension.top + extension.bottom
    if max(width, height) > max_size:
        raise InvalidMask(
            f"the extended canvas would be {width}x{height}; this model goes up to "
            f"{max_size} pixels a side"
        )
    import numpy as np  # here, not at import: the window imports this module at start-up

    pixels = np.asarray(image)
    pad = ((extension.top, extension.bottom), (extension.left, extension.right), (0, 0))
    if fill is Fill.EDGE:
        grown = Image.fromarray(np.pad(pixels, pad, mode="edge"))
        # Smear the stretched stripes a little so the model sees colours, not streaks.
        blurred = grown.filter(ImageFilter.GaussianBlur(8))
        blurred.paste(image, (extension.left, extension.top))
        canvas = blurred
    else:
        rng = np.random.default_rng(seed)
        noise = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
        noise[extension.top : extension.top + image.height,
              extension.left : extension.left + image.width] = pixels  # fmt: skip
        canvas = Image.fromarray(noise)
    mask = Image.new("L", (width, height), 255)
    mask.paste(0, (extension.left, extension.top, extension.left + image.width,
                   extension.top + image.height))  # fmt: skip
    return Outpaint(png_bytes(canvas), png_bytes(mask), width, height)
