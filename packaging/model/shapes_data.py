"""Procedural captioned pictures: flat coloured shapes on flat coloured backgrounds.

Everything the bundled model knows comes from here, so the vocabulary below is
also the model's whole prompt vocabulary (see the model card).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

# Saturated, well separated colours so that "nearest palette colour" is an
# unambiguous way to score generated images (benchmarks/model_quality.py).
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 50),
    "blue": (30, 70, 220),
    "yellow": (245, 215, 30),
    "orange": (245, 130, 20),
    "purple": (130, 40, 170),
    "white": (245, 245, 245),
    "black": (15, 15, 15),
}
COLOURS: tuple[str, ...] = tuple(PALETTE)
SHAPES: tuple[str, ...] = ("circle", "square", "triangle")
SIZE_WORDS: tuple[str, ...] = ("small", "large")
# Every word a caption can contain; each becomes exactly one token.
VOCABULARY: tuple[str, ...] = ("a", "an", "on", "and", "background", *COLOURS, *SHAPES, *SIZE_WORDS)

# Shape "radius" as a fraction of the image side, per size class.
_SIZE_RANGES: dict[str, tuple[float, float]] = {
    "small": (0.12, 0.18),
    "medium": (0.2, 0.3),
    "large": (0.33, 0.42),
}
_SUPERSAMPLE = 2  # draw at 2x and downsample: cheap anti-aliasing


@dataclass(frozen=True)
class ShapeSpec:
    """One shape to draw; centre and radius are fractions of the image side."""

    shape: str
    colour: str
    cx: float
    cy: float
    radius: float


@dataclass(frozen=True)
class Sample:
    caption: str
    background: str
    shapes: tuple[ShapeSpec, ...]


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _noun_phrase(spec: ShapeSpec, size_word: str | None) -> str:
    words = [w for w in (size_word, spec.colour, spec.shape) if w]
    return f"{article(words[0])} {' '.join(words)}"


def caption_for(background: str, phrases: list[str]) -> str:
    return f"{' and '.join(phrases)} on {article(background)} {background} background"


def _pick_size(rng: np.random.Generator, allowed: tuple[str, ...]) -> tuple[str, float]:
    size_class = str(rng.choice(allowed))
    lo, hi = _SIZE_RANGES[size_class]
    return size_class, float(rng.uniform(lo, hi))


def _size_word(rng: np.random.Generator, size_class: str) -> str | None:
    # Mostly name the size when it is extreme; leaving it out sometimes keeps
    # size-less prompts valid for every size.
    if size_class in SIZE_WORDS and rng.random() < 0.7:
        return size_class
    return None


def sample_scene(rng: np.random.Generator, two_shape_prob: float = 0.25) -> Sample:
    """Draw a random scene description (no pixels yet)."""
    n_shapes = 2 if rng.random() < two_shape_prob else 1
    colours = [str(c) for c in rng.choice(COLOURS, size=n_shapes + 1, replace=False)]
    background, shape_colours = colours[0], colours[1:]
    specs: list[ShapeSpec] = []
    phrases: list[str] = []
    if n_shapes == 1:
        size_class, radius = _pick_size(rng, ("small", "medium", "medium", "large", "large"))
        # Keep the shape fully inside the frame.
        slack = max(0.0, 0.5 - radius - 0.04)
        cx, cy = (0.5 + rng.uniform(-slack, slack, size=2) * 0.6).tolist()
        spec = ShapeSpec(str(rng.choice(SHAPES)), shape_colours[0], cx, cy, radius)
        specs.append(spec)
        phrases.append(_noun_phrase(spec, _size_word(rng, size_class)))
    else:
        # Two shapes side by side: one per half, in random caption order.
        halves = [0.27, 0.73] if rng.random() < 0.5 else [0.73, 0.27]
        for colour, cx in zip(shape_colours, halves, strict=True):
            size_class, radius = _pick_size(rng, ("small", "small", "medium"))
            radius = min(radius, 0.21)
            cy = 0.5 + float(rng.uniform(-0.15, 0.15))
            spec = ShapeSpec(str(rng.choice(SHAPES)), colour, cx, cy, radius)
            specs.append(spec)
            phrases.append(_noun_phrase(spec, _size_word(rng, size_class)))
    return Sample(caption_for(background, phrases), background, tuple(specs))


def _draw_shape(draw: ImageDraw.ImageDraw, spec: ShapeSpec, side: int) -> None:
    cx, cy, r = spec.cx * side, spec.cy * side, spec.radius * side
    fill = PALETTE[spec.colour]
    if spec.shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=fill)
    elif spec.shape == "square":
        h = r * 0.88  # a square of equal area looks bigger than the circle; shrink it a bit
        draw.rectangle((cx - h, cy - h, cx + h, cy + h), fill=fill)
    else:  # upright equilateral triangle centred on its centroid
        pts = [
            (cx + r * math.cos(math.radians(a)), cy - r * math.sin(math.radians(a)))
            for a in (90.0, 210.0, 330.0)
        ]
        # Shift down a little so the triangle's visual mass is centred.
        pts = [(x, y + r * 0.15) for x, y in pts]
        draw.polygon(pts, fill=fill)


def render(sample: Sample, size: int = 64) -> np.ndarray:
    """Render a scene to an (H, W, 3) uint8 array."""
    big = size * _SUPERSAMPLE
    img = Image.new("RGB", (big, big), PALETTE[sample.background])
    draw = ImageDraw.Draw(img)
    for spec in sample.shapes:
        _draw_shape(draw, spec, big)
    img = img.resize((size, size), Image.Resampling.BOX)
    return np.asarray(img, dtype=np.uint8)


def make_dataset(n: int, seed: int, size: int = 64) -> tuple[np.ndarray, list[str]]:
    """Deterministically draw ``n`` images (N, H, W, 3 uint8) and their captions."""
    rng = np.random.default_rng(seed)
    images = np.empty((n, size, size, 3), dtype=np.uint8)
    captions: list[str] = []
    for i in range(n):
        sample = sample_scene(rng)
        images[i] = render(sample, size)
        captions.append(sample.caption)
    return images, captions
