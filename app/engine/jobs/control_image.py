"""ControlNet preprocessors that need no download, run once at submit (OpenCV, no torch).

The image they make is what is stored with the job (job_input, kind "control<i>") and what
the window shows before queueing; a resumed job reads it back, never re-runs them.
- "none": the image is a control image already (a depth map, a pose made elsewhere);
- "canny": OpenCV's Canny edges (A1111's thresholds 100 and 200), white on black;
- "softedge": soft edges (the gradient's strength, blurred), for a photo or a painting;
- "lineart": the lines of a drawing (dark on light) as white lines on black;
- "scribble": a sketch thresholded (Otsu) and inverted, its strokes thickened a little.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from app.engine.jobs.init_image import MAX_INIT_BYTES, open_rgb
from app.engine.jobs.params import CONTROL_MODULES, InvalidParameters

CANNY_LOW, CANNY_HIGH = 100, 200  # A1111's ControlNet extension's defaults


class InvalidControlImage(InvalidParameters):
    """A control image that cannot be used; the message says why."""


def read_control_image(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_INIT_BYTES:
            raise InvalidControlImage(f"the control image {path} is {size // 2**20} MB, too large")
        return path.read_bytes()
    except OSError as error:
        raise InvalidControlImage(
            f"cannot read the control image {path}: {error.strerror or error}"
        ) from error


def preprocess(module: str, data: bytes) -> bytes:
    """The control image `module` makes of the image in `data`, as an RGB PNG."""
    if module not in CONTROL_MODULES:
        known = ", ".join(CONTROL_MODULES)
        raise InvalidControlImage(f"unknown preprocessor {module!r} (known: {known})")
    rgb = np.asarray(open_rgb(data))
    out = rgb if module == "none" else _PREPROCESSORS[module](rgb)
    if out.ndim == 2:
        out = np.repeat(out[:, :, None], 3, axis=2)
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(out, dtype=np.uint8), "RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def _gray(rgb: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)


def _canny(rgb: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.Canny(rgb, CANNY_LOW, CANNY_HIGH)


def _soft_edges(rgb: np.ndarray) -> np.ndarray:
    import cv2

    gray = cv2.GaussianBlur(_gray(rgb), (5, 5), 0).astype(np.float32)
    strength = cv2.magnitude(cv2.Sobel(gray, cv2.CV_32F, 1, 0), cv2.Sobel(gray, cv2.CV_32F, 0, 1))
    strength = cv2.GaussianBlur(strength, (3, 3), 0)
    peak = float(strength.max())
    return (strength * (255.0 / peak) if peak > 0 else strength).clip(0, 255).astype(np.uint8)


def _lineart(rgb: np.ndarray) -> np.ndarray:
    import cv2

    # Dark lines on a light page, whatever the page's shading: each pixel against its
    # neighbourhood; white where it is darker than its surroundings.
    return cv2.adaptiveThreshold(
        _gray(rgb), 255, cv2.ADAPTIVE_THRESH_GAUSSIAN_C, cv2.THRESH_BINARY_INV, 11, 8
    )


def _scribble(rgb: np.ndarray) -> np.ndarray:
    import cv2

    _, strokes = cv2.threshold(_gray(rgb), 0, 255, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
    return cv2.dilate(strokes, np.ones((3, 3), np.uint8))


_PREPROCESSORS = {
    "canny": _canny,
    "softedge": _soft_edges,
    "lineart": _lineart,
    "scribble": _scribble,
}
