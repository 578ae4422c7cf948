"""X/Y/Z plot axes: parsing, cell order, each setting an axis varies, refusals naming the
axis and value; and the composed image's layout and placeholders."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from app.engine.generation.post.grid import PLACEHOLDER, Cell, compose
from app.engine.jobs.grid_spec import GridAxisRefused, grid_cells, parse_axis, spec_from_axes
from app.engine.jobs.params import GenerationParams, InvalidParameters

BASE = GenerationParams("a <lora:ink:0.5> cat", seed=1)


def test_cells_are_every_combination_x_fastest() -> None:
    spec = spec_from_axes([("x", "steps=4,8"), ("y", "cfg=3,7"), ("z", "sampler=euler,ddim")])
    cells = grid_cells(BASE, spec)
    assert spec.shape == (2, 2, 2) and len(cells) == 8
    assert [(c.steps, c.cfg, c.scheduler) for c in cells[:4]] == [
        (4, 3.0, "Euler"), (8, 3.0, "Euler"), (4, 7.0, "Euler"), (8, 7.0, "Euler"),
    ]  # fmt: skip
    assert {c.scheduler for c in cells[4:]} == {"DDIM"}
    assert spec.coordinates(5) == (1, 0, 1)


def test_each_setting_an_axis_varies() -> None:
    def one(text: str) -> list[GenerationParams]:
        return grid_cells(BASE, spec_from_axes([("x", text)]))

    assert [c.seed for c in one("seed=3,4")] == [3, 4]
    assert [(c.width, c.height) for c in one("size=64x64,96x128")] == [(64, 64), (96, 128)]
    assert [c.model for c in one("model=a,b")] == ["a", "b"]
    assert [c.prompt for c in one("lora=0,1.5")] == ["a <lora:ink:0> cat", "a <lora:ink:1.5> cat"]
    assert [c.prompt for c in one("sr=cat,dog")] == [BASE.prompt, "a <lora:ink:0.5> dog"]
    img = GenerationParams("x", init_image="job:3", seed=1)
    cells = grid_cells(img, spec_from_axes([("x", "strength=0.3,0.6")]))
    assert [c.strength for c in cells] == [0.3, 0.6]


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ([("x", "steps=4,999")], "the X axis steps=999: steps must be between 1 and 150"),
        ([("x", "steps=2"), ("y", "cfg=3,x")], "the Y axis cfg=x: not a number"),
        ([("x", "sampler=Heun")], "the X axis sampler=Heun: unknown sampler"),
        ([("x", "size=65x64")], "the X axis size=65x64: width 65 is not a multiple of 8"),
        ([("x", "strength=0.5")], "the X axis strength=0.5: denoising strength needs an init"),
        ([("x", "sr=dog,cow")], "the X axis sr=dog: the prompt does not contain 'dog'"),
        ([("x", "steps=1,2"), ("y", "steps=3")], "two axes vary the same setting"),
    ],
)
def test_a_refused_value_names_its_axis(axes: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(GridAxisRefused, match=message.replace("(", r"\(")):
        grid_cells(BASE, spec_from_axes(axes))


def test_what_the_model_refuses_names_the_axis_and_value() -> None:
    def check(params: GenerationParams) -> None:
        if params.model == "sdxl-only":
            raise InvalidParameters("model 'sdxl-only' was not found")

    with pytest.raises(GridAxisRefused, match="the X axis model=sdxl-only: model 'sdxl-only'"):
        grid_cells(BASE, spec_from_axes([("x", "model=easel-tiny,sdxl-only")]), check)


def test_parse_refusals() -> None:
    with pytest.raises(GridAxisRefused, match="'colour' is unknown"):
        parse_axis("x", "colour=red")
    with pytest.raises(GridAxisRefused, match="is not NAME=VALUE"):
        parse_axis("y", "steps")


def png(colour: tuple[int, int, int], size: tuple[int, int] = (64, 64)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


def test_compose_lays_cells_out_with_labels_and_placeholders() -> None:
    spec = spec_from_axes([("x", "steps=1,2"), ("y", "cfg=3,7")])
    red, blue = (200, 0, 0), (0, 0, 200)
    image = np.asarray(compose(spec, [Cell(png(red)), Cell(None, "cancelled"),
                                      Cell(png(blue)), Cell(png(red))]))  # fmt: skip
    h, w, _ = image.shape
    assert h > 128 and w > 128  # the labels take room above and left
    top, left = h - 128, w - 128
    assert tuple(image[top + 32, left + 32]) == red
    assert tuple(image[top + 5, left + 64 + 5]) == PLACEHOLDER
    assert tuple(image[top + 64 + 32, left + 32]) == blue
    assert (image[: top - 1, left:] != 255).any()  # some label ink above the cells
    with pytest.raises(ValueError, match="3 cells for a grid of 4"):
        compose(spec, [Cell(None)] * 3)
