"""Init images for img2img: checked and converted once, at submit, with a clear message.

PIL only (no torch): the CLI and the GUI prepare an image before it is stored with its
job; the worker opens the stored bytes (or a parent's output) with `open_rgb`.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from app.engine.jobs.image_text import MAX_IMAGE_PIXELS, unreadable_reason
from app.engine.jobs.params import MAX_SIZE, MIN_SIZE, SIZE_MULTIPLE, InvalidParameters

MAX_INIT_BYTES = 64 * 1024 * 1024
# Refused before decoding: a "decompression bomb" stays unread (the limit of every image
# Easel reads from outside, /png-info and dropped PNGs too).
MAX_INIT_PIXELS = MAX_IMAGE_PIXELS
BACKGROUND = (255, 255, 255)  # what transparent pixels become


class InvalidInitImage(InvalidParameters):
    """An init image that cannot be used; the message says what is wrong with it."""


@dataclass(frozen=True)
class PreparedInit:
    png: bytes  # RGB, exactly width x height: what the denoising loop will encode
    width: int
    height: int
    notes: list[str] = field(default_factory=list)  # conversions made, to tell the user


def read_init_image(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_INIT_BYTES:
            raise InvalidInitImage(
                f"the init image {path} is {size // 2**20} MB; the limit is "
                f"{MAX_INIT_BYTES // 2**20} MB"
            )
        return path.read_bytes()
    except OSError as error:
        raise InvalidInitImage(
            f"cannot read the init image {path}: {error.strerror or error}"
        ) from error


def prepare_init_image(data: bytes, size: tuple[int, int] | None = None) -> PreparedInit:
    """`data` as an RGB PNG of `size` (default: its own size, fitted to the model's limits)."""
    image = open_rgb(data)
    notes = []
    if _had_alpha(data):
        notes.append("its transparent parts were filled with white")
    target = size or _fitting_size(image.size)
    if size is None and target != image.size:
        notes.append(
            f"it was resized from {image.width}x{image.height} to {target[0]}x{target[1]} "
            f"(sides must be multiples of {SIZE_MULTIPLE}, at most {MAX_SIZE})"
        )
    converted = fit_to(image, target)
    buffer = io.BytesIO()
    converted.save(buffer, format="PNG")
    return PreparedInit(buffer.getvalue(), target[0], target[1], notes)


def open_rgb(data: bytes) -> Image.Image:
    """The image in `data` as RGB (transparency flattened onto white), or `InvalidInitImage`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            if image.width * image.height > MAX_INIT_PIXELS:
                raise InvalidInitImage(
                    f"the init image is {image.width}x{image.height}, too large to load; "
                    f"scale it below {MAX_INIT_PIXELS // 1_000_000} megapixels first"
                )
            image.load()
    except InvalidInitImage:
        raise  # our own sentence (too many pixels); it is a ValueError too
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        # PIL's messages quote the file object ("<_io.BytesIO object at 0x7f...>"): ours.
        raise InvalidInitImage(
            f"the init image is not an image that can be read: {unreadable_reason(error)}"
        ) from error
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as error:
        raise InvalidInitImage(
            f"the init image is too large to load (more than {MAX_INIT_PIXELS // 1_000_000} "
            "megapixels)"
        ) from error
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, BACKGROUND)
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return image.convert("RGB")


def fit_to(image: Image.Image, size: tuple[int, int]) -> Image.Image:
    """`image` at exactly `size`, resized with Lanczos if it differs (upscale, odd sizes)."""
    if image.size == size:
        return image
    return image.resize(size, Image.Resampling.LANCZOS)


def _had_alpha(data: bytes) -> bool:
    with Image.open(io.BytesIO(data)) as image:
        return image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info


def _fitting_size(size: tuple[int, int]) -> tuple[int, int]:
    width, height = size
    shrink = min(1.0, MAX_SIZE / max(width, height))
    fitted = tuple(int(side * shrink) // SIZE_MULTIPLE * SIZE_MULTIPLE for side in (width, height))
    if min(fitted) < MIN_SIZE:
        raise InvalidInitImage(
            f"the init image is {width}x{height}; each side must be at least {MIN_SIZE} pixels"
        )
    return fitted[0], fitted[1]
