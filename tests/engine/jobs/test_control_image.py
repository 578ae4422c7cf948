"""The preprocessors that need no download, on small drawn images: what each one keeps."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from app.engine.jobs.control_image import InvalidControlImage, preprocess
from app.engine.jobs.params import InvalidParameters


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def sketch() -> Image.Image:
    """A pencil line on a page that is lighter on the left than on the right."""
    page = Image.fromarray(np.tile(np.linspace(250, 200, 64, dtype=np.uint8), (64, 1)), "L")
    ImageDraw.Draw(page).line([(10, 32), (54, 32)], fill=40, width=2)
    return page.convert("RGB")


def out(module: str, image: Image.Image) -> np.ndarray:
    with Image.open(io.BytesIO(preprocess(module, png(image)))) as result:
        assert result.mode == "RGB" and result.size == image.size
        return np.asarray(result)[:, :, 0].astype(int)


def test_none_keeps_the_image() -> None:
    image = sketch()
    assert (out("none", image) == np.asarray(image)[:, :, 0]).all()


@pytest.mark.parametrize("module", ["scribble", "lineart", "canny"])
def test_line_preprocessors_give_white_lines_on_black(module: str) -> None:
    result = out(module, sketch())
    assert set(np.unique(result)) == {0, 255}
    assert result[30:35, 32].max() == 255  # the line (canny: its two edges) is white
    assert result[5:20, 5:60].max() == 0 and result[45:60, 5:60].max() == 0  # the page black


def test_soft_edges_are_graded_and_strongest_at_the_line() -> None:
    result = out("softedge", sketch())
    assert len(np.unique(result)) > 10  # soft, not thresholded
    assert result[28:37, 32].max() > 200 and result[5:15, 32].max() < 40


def test_an_unknown_preprocessor_or_a_broken_image_is_refused() -> None:
    with pytest.raises(InvalidControlImage, match="unknown preprocessor 'depth_midas'"):
        preprocess("depth_midas", png(sketch()))
    with pytest.raises(InvalidParameters, match="not an image"):
        preprocess("canny", b"not a png")
