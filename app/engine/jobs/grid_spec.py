"""X/Y/Z plot: axes over the settings, each cell an ordinary job (pure: no torch, no Qt).

As AUTOMATIC1111's X/Y/Z plot script: up to three axes, each a setting and its values
(`steps=4,8,12`); the cells are every combination, x fastest, then y, then z. Prompt S/R
("search/replace"): the first value is the text searched in the prompt, each value in
turn replaces it (the first cell keeps the prompt as it is). The grid itself is one more
job of the group, BLOCKED until every cell is settled, that composes the labelled image
(`generation.grid`). Each value is checked alone at submit, so a value the model refuses is
refused naming its axis and value, before anything is stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.engine.jobs.params import (
    KIND_GRID,
    SCHEDULERS,
    GenerationParams,
    InvalidParameters,
    parse_size,
)
from app.errors import UserError

AXIS_NAMES = ("x", "y", "z")
# The settings an axis can vary, as the command line names them, and A1111's label.
LABELS = {
    "seed": "Seed", "steps": "Steps", "cfg": "CFG Scale", "sampler": "Sampler",
    "size": "Size", "model": "Checkpoint name", "lora": "LoRA weight",
    "strength": "Denoising", "sr": "Prompt S/R",
}  # fmt: skip
MAX_CELLS = 100
_LORA_WEIGHT = re.compile(r"(<lora:[^:>]+)(?::[^:>]*)?((?::[^>]*)?>)", re.IGNORECASE)


class GridAxisRefused(InvalidParameters):
    """An axis, or one of its values, that cannot make a cell; names the axis and value."""


@dataclass(frozen=True)
class Axis:
    name: str  # a key of LABELS
    values: tuple[str, ...]

    @property
    def label(self) -> str:
        return LABELS[self.name]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "values": list(self.values)}


@dataclass(frozen=True)
class GridSpec:
    axes: tuple[Axis, ...]  # x, then y, then z (as many as given)

    @property
    def shape(self) -> tuple[int, int, int]:
        counts = [len(axis.values) for axis in self.axes] + [1, 1, 1]
        return counts[0], counts[1], counts[2]

    @property
    def cells(self) -> int:
        x, y, z = self.shape
        return x * y * z

    def coordinates(self, cell: int) -> tuple[int, int, int]:
        x, y, _z = self.shape
        return cell % x, (cell // x) % y, cell // (x * y)

    def to_dict(self) -> dict[str, Any]:
        return {"axes": [axis.to_dict() for axis in self.axes], "shape": list(self.shape)}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> GridSpec:
        axes = tuple(Axis(a["name"], tuple(a["values"])) for a in data.get("axes", []))
        return GridSpec(axes)

    def parameters_text(self) -> str:
        """A1111's record of the plot in the grid's `parameters` text."""
        parts = ["Script: X/Y/Z plot"]
        for letter, axis in zip(AXIS_NAMES, self.axes, strict=False):
            values = ", ".join(axis.values)
            parts.append(
                f'{letter.upper()} Type: {axis.label}, {letter.upper()} Values: "{values}"'
            )
        return ", ".join(parts)


def parse_axis(letter: str, text: str) -> Axis:
    """`steps=4,8,12` -> Axis("steps", ("4", "8", "12")), or a one-sentence refusal."""
    name, sep, values = text.partition("=")
    name = name.strip().lower()
    if not sep or not values.strip():
        raise GridAxisRefused(f"the {letter.upper()} axis {text!r} is not NAME=VALUE,VALUE,...")
    if name not in LABELS:
        known = ", ".join(LABELS)
        raise GridAxisRefused(f"the {letter.upper()} axis {name!r} is unknown (known: {known})")
    parts = tuple(value.strip() for value in values.split(","))
    if any(not value for value in parts):
        raise GridAxisRefused(f"the {letter.upper()} axis {name} has an empty value")
    return Axis(name, parts)


def apply(params: GenerationParams, axis: Axis, value: str, letter: str = "x") -> GenerationParams:
    """`params` with `axis` set to `value`; a value that is not one is refused naming both."""

    def refuse(why: str) -> GridAxisRefused:
        return GridAxisRefused(f"the {letter.upper()} axis {axis.name}={value}: {why}")

    try:
        if axis.name == "seed":
            return replace(params, seed=int(value))
        if axis.name == "steps":
            return replace(params, steps=int(value))
        if axis.name == "cfg":
            return replace(params, cfg=float(value))
        if axis.name == "strength" and params.init_image:
            return replace(params, strength=float(value))
    except ValueError:
        raise refuse("not a number") from None
    if axis.name == "strength":
        raise refuse("denoising strength needs an init image (--init-image)")
    if axis.name == "sampler":
        match = next((s for s in SCHEDULERS if s.lower() == value.lower()), None)
        if match is None:
            raise refuse(f"unknown sampler (known: {', '.join(SCHEDULERS)})")
        return replace(params, scheduler=match)
    if axis.name == "size":
        try:
            width, height = parse_size(value)
        except InvalidParameters as error:
            raise refuse(str(error)) from None
        return replace(params, width=width, height=height)
    if axis.name == "model":
        return replace(params, model=value)
    if axis.name == "lora":
        try:
            float(value)
        except ValueError:
            raise refuse("not a number") from None
        if not _LORA_WEIGHT.search(params.prompt):
            raise refuse("the prompt has no <lora:name:weight> to weigh")
        prompt = _LORA_WEIGHT.sub(lambda m: f"{m.group(1)}:{value}{m.group(2)}", params.prompt)
        return replace(params, prompt=prompt)
    # Prompt S/R: the axis's first value is what is searched.
    search = axis.values[0]
    if search not in params.prompt:
        raise refuse(f"the prompt does not contain {search!r}")
    return replace(params, prompt=params.prompt.replace(search, value))


Check = Callable[[GenerationParams], object]


def grid_cells(
    base: GenerationParams, spec: GridSpec, check: Check | None = None
) -> list[GenerationParams]:
    """Every cell's settings (x fastest), each value checked alone first so that what is
    refused names its axis and value; then every cell as a whole."""
    if not spec.axes:
        raise GridAxisRefused("a grid needs at least an X axis")
    if len(spec.axes) > len(AXIS_NAMES):
        raise GridAxisRefused("a grid has at most three axes (X, Y, Z)")
    if spec.cells > MAX_CELLS:
        raise GridAxisRefused(f"the grid has {spec.cells} cells; at most {MAX_CELLS}")
    names = [axis.name for axis in spec.axes]
    if len(set(names)) != len(names):
        raise GridAxisRefused("two axes vary the same setting")
    for letter, axis in zip(AXIS_NAMES, spec.axes, strict=False):
        for value in axis.values:
            _checked(apply(base, axis, value, letter), check, f"the {letter.upper()} axis "
                     f"{axis.name}={value}")  # fmt: skip
    cells = []
    for cell in range(spec.cells):
        params = base
        for letter, axis, index in zip(AXIS_NAMES, spec.axes, spec.coordinates(cell), strict=False):
            params = apply(params, axis, axis.values[index], letter)
        where = ", ".join(
            f"{letter.upper()} {axis.name}={axis.values[i]}"
            for letter, axis, i in zip(AXIS_NAMES, spec.axes, spec.coordinates(cell), strict=False)
        )
        cells.append(_checked(params, check, f"the cell {where}"))
    return cells


def _checked(params: GenerationParams, check: Check | None, where: str) -> GenerationParams:
    try:
        checked = params.validated()
        if check is not None:
            check(checked)
    except UserError as error:
        raise GridAxisRefused(f"{where}: {error}") from None
    return checked


def composer_params(base: GenerationParams) -> GenerationParams:
    """The grid's own job: the base settings (for the list and the PNG), composing."""
    return replace(base, kind=KIND_GRID, init_image="", strength=1.0)


def cell_labels(spec: GridSpec) -> list[list[str]]:
    """Each axis's value labels as the grid shows them ("Steps: 8")."""
    return [[f"{axis.label}: {value}" for value in axis.values] for axis in spec.axes]


def describe(spec: GridSpec) -> str:
    return " x ".join(f"{axis.name} ({len(axis.values)})" for axis in spec.axes)


def spec_from_axes(texts: Sequence[tuple[str, str]]) -> GridSpec:
    """[("x", "steps=4,8"), ("y", "cfg=3,7")] -> GridSpec."""
    return GridSpec(tuple(parse_axis(letter, text) for letter, text in texts))
