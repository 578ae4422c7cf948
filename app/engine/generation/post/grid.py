"""Composing a grid's labelled image from its cells (PIL only: no torch).

Cells sit x across, y down; a third axis (z) puts one such grid beside the next, each
titled with its z value. A cell without an image (failed, cancelled, not there) is a grey
placeholder that says why. Labels use DejaVu Sans when the system has it, else PIL's own
font, at a size that follows the cells.
"""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from app.engine.jobs.grid_spec import GridSpec, cell_labels

FONT_PATHS = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/TTF/DejaVuSans.ttf"),
    Path("/Library/Fonts/DejaVuSans.ttf"),
    Path("C:/Windows/Fonts/DejaVuSans.ttf"),
)
BACKGROUND = (255, 255, 255)
PLACEHOLDER = (96, 96, 96)
INK = (0, 0, 0)
PLACEHOLDER_INK = (255, 255, 255)
MIN_FONT, MAX_FONT = 10, 48
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


@dataclass(frozen=True)
class Cell:
    png: bytes | None  # the cell's image; None: a placeholder
    reason: str = ""  # why there is no image ("cancelled", "failed: ...")


@cache
def font(size: int) -> Font:
    for path in FONT_PATHS:
        if path.is_file():
            return ImageFont.truetype(str(path), size)
    return ImageFont.load_default(size)


def compose(spec: GridSpec, cells: list[Cell]) -> Image.Image:
    """The labelled grid of `cells` (in cell order, x fastest)."""
    if len(cells) != spec.cells:
        raise ValueError(f"{len(cells)} cells for a grid of {spec.cells}")
    images = [_open(cell) for cell in cells]
    width = max((im.width for im in images if im is not None), default=64)
    height = max((im.height for im in images if im is not None), default=64)
    nx, ny, nz = spec.shape
    labels = [*cell_labels(spec), [""], [""]]
    size = max(MIN_FONT, min(MAX_FONT, width // 10))
    text_font = font(size)
    pad = size // 2
    left = max(_text_width(text, text_font) for text in labels[1]) + 2 * pad if ny > 1 else 0
    top_line = size + 2 * pad
    x_lines = max(len(_wrapped(text, width, text_font)) for text in labels[0])
    top = x_lines * (size + pad) + 2 * pad
    title = top_line if nz > 1 else 0
    block_w = left + nx * width
    sheet = Image.new("RGB", (nz * block_w + (nz - 1) * pad, title + top + ny * height), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    for z in range(nz):
        x0 = z * (block_w + pad)
        if nz > 1:
            _centred(draw, labels[2][z], x0 + left, 0, nx * width, title, text_font)
        for x in range(nx):
            lines = _wrapped(labels[0][x], width, text_font)
            for i, line in enumerate(lines):
                _centred(draw, line, x0 + left + x * width, title + pad + i * (size + pad),
                         width, size + pad, text_font)  # fmt: skip
        for y in range(ny):
            if left:
                _centred(draw, labels[1][y], x0, title + top + y * height, left, height, text_font)
            for x in range(nx):
                index = x + nx * (y + ny * z)
                box = (x0 + left + x * width, title + top + y * height)
                _paste(sheet, draw, images[index], cells[index], box, (width, height))
    return sheet


def _open(cell: Cell) -> Image.Image | None:
    if cell.png is None:
        return None
    try:
        with Image.open(io.BytesIO(cell.png)) as image:
            return image.convert("RGB")
    except OSError:
        return None


def _paste(
    sheet: Image.Image,
    draw: ImageDraw.ImageDraw,
    image: Image.Image | None,
    cell: Cell,
    box: tuple[int, int],
    size: tuple[int, int],
) -> None:
    x, y = box
    width, height = size
    if image is not None:
        sheet.paste(image, (x + (width - image.width) // 2, y + (height - image.height) // 2))
        return
    draw.rectangle((x + 1, y + 1, x + width - 2, y + height - 2), fill=PLACEHOLDER)
    reason = cell.reason or "no image"
    small = font(max(MIN_FONT, min(MAX_FONT, width // 12)))
    lines = _wrapped(reason, width - 8, small)[:6]
    line_h = int(small.size) + 2 if isinstance(small, ImageFont.FreeTypeFont) else 12
    start = y + (height - len(lines) * line_h) // 2
    for i, line in enumerate(lines):
        _centred(draw, line, x, start + i * line_h, width, line_h, small, PLACEHOLDER_INK)


def _text_width(text: str, text_font: Font) -> int:
    left, _top, right, _bottom = text_font.getbbox(text)
    return int(right - left)


def _wrapped(text: str, width: int, text_font: Font) -> list[str]:
    """`text` in lines that fit `width` (whole words; a long word is cut)."""
    for chars in range(max(len(text), 1), 0, -1):
        lines = textwrap.wrap(text, chars, break_long_words=True) or [""]
        if all(_text_width(line, text_font) <= width for line in lines):
            return lines
    return [text]


def _centred(
    draw: ImageDraw.ImageDraw,
    text: str,
    x: int,
    y: int,
    width: int,
    height: int,
    text_font: Font,
    fill: tuple[int, int, int] = INK,
) -> None:
    left, top, right, bottom = text_font.getbbox(text)
    tx = x + (width - (right - left)) / 2 - left
    ty = y + (height - (bottom - top)) / 2 - top
    draw.text((tx, ty), text, font=text_font, fill=fill)
