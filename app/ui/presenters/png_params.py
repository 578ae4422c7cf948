"""Generation parameters from a PNG's text chunks: Easel's `easel` JSON or A1111 `parameters`.

Qt-free and torch-free so it can be tested alone; the prompt panel calls `read_png_params`
when a PNG is dropped on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from app.engine.jobs.params import (
    CONTROL_MODULES,
    SCHEDULERS,
    ControlLayer,
    GenerationParams,
    InvalidParameters,
    decode_control,
)
from app.ui.presenters.i18n import translate

EASEL_KEY = "easel"
A1111_KEY = "parameters"

# A1111 sampler names that have a scheduler of ours; "Karras" etc. variants map to the base.
_SAMPLER_ALIASES = {name.lower(): name for name in SCHEDULERS}
_NEGATIVE = "Negative prompt:"
_SETTING = re.compile(r'\s*([\w ]+?):\s*("(?:[^"\\]|\\.)*"|[^,]*)(?:,|$)')
_CONTROLNET = re.compile(r"ControlNet (\d+)")
_HASH_SUFFIX = re.compile(r"\s*\[[0-9a-fA-F]+\]$")


class NoParameters(ValueError):
    """The file carries no generation parameters we can read; the message says why."""


@dataclass(frozen=True)
class ParsedParams:
    """Parameters read from a file, plus what could not be used (shown to the user)."""

    params: GenerationParams
    warnings: list[str] = field(default_factory=list)
    # ControlNet layers whose ControlNet is here; without their images (a PNG does not carry
    # them): `image` is "", the window asks for one. `params.control` is then "".
    control: tuple[ControlLayer, ...] = ()


def with_controlnets(parsed: ParsedParams, available: Collection[str]) -> ParsedParams:
    """`parsed` keeping the control layers whose ControlNet is in `available` (by name),
    with a warning for each other one."""
    kept, warnings = [], list(parsed.warnings)
    for layer in parsed.control:
        if layer.model in available:
            kept.append(layer)
        else:
            warnings.append(
                translate("PngParams", "ControlNet {name} is not installed; its layer was left out")
                .format(name=repr(layer.model))
            )  # fmt: skip
    return replace(parsed, control=tuple(kept), warnings=warnings)


def read_png_params(path: Path, controlnets: Collection[str] | None = None) -> ParsedParams:
    """The parameters `path` was made with; its control layers where their ControlNet is
    one of `controlnets` (default: the ones installed)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            text = {str(k): str(v) for k, v in image.info.items() if isinstance(v, str)}
    except (OSError, UnidentifiedImageError) as error:
        raise NoParameters(
            translate("PngParams", "{name} is not a readable image: {error}").format(
                name=path.name, error=error
            )
        ) from error
    parsed = params_from_text_chunks(text, name=path.name)
    if parsed.control:
        if controlnets is None:
            from app.engine.generation.controlnets import list_controlnets

            controlnets = [info.name for info in list_controlnets() if info.supported]
        parsed = with_controlnets(parsed, controlnets)
    return parsed


def params_from_text_chunks(chunks: dict[str, str], *, name: str = "") -> ParsedParams:
    """Prefer Easel's exact JSON; fall back to the A1111 text other tools also write."""
    if EASEL_KEY in chunks:
        return parse_easel(chunks[EASEL_KEY])
    if A1111_KEY in chunks:
        return parse_a1111(chunks[A1111_KEY])
    name = name or translate("PngParams", "the image")
    raise NoParameters(
        translate(
            "PngParams", "{name} has no generation parameters (not made by Easel or A1111)"
        ).format(name=name)
    )


def parse_easel(text: str) -> ParsedParams:
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise NoParameters(
            translate("PngParams", "the easel parameters are not valid JSON: {error}").format(
                error=error
            )
        ) from error
    if not isinstance(raw, dict):
        raise NoParameters(translate("PngParams", "the easel parameters are not a JSON object"))
    known = {f.name for f in fields(GenerationParams)}
    unknown = sorted(set(raw) - known)
    ignored = translate("PngParams", "ignored unknown field(s): {names}")
    warnings = [ignored.format(names=", ".join(unknown))] if unknown else []
    values = {k: v for k, v in raw.items() if k in known}
    try:
        if values.pop("reference", ""):  # its image is not in the PNG: nothing to submit
            warnings.append(translate("PngParams", "the reference image is not restored"))
        layers = decode_control(str(values.pop("control", "") or ""))
        control = tuple(replace(layer, image="") for layer in layers)
        return ParsedParams(GenerationParams(**_coerced(values)), warnings, control)
    except (TypeError, ValueError, InvalidParameters) as error:
        raise NoParameters(
            translate("PngParams", "the easel parameters are incomplete: {error}").format(
                error=error
            )
        ) from error


def _coerced(values: dict[str, Any]) -> dict[str, Any]:
    ints = {"steps", "width", "height", "seed"}
    out = dict(values)
    for key in ints & out.keys():
        out[key] = int(out[key])
    if "cfg" in out:
        out["cfg"] = float(out["cfg"])
    return out


def parse_a1111(text: str) -> ParsedParams:
    """`prompt\\nNegative prompt: ...\\nSteps: 20, Sampler: Euler a, ...` -> parameters."""
    lines = text.strip().splitlines()
    if not lines:
        raise NoParameters(translate("PngParams", "the parameters text is empty"))
    settings_line = lines[-1] if lines[-1].lstrip().startswith("Steps:") else ""
    body = lines[:-1] if settings_line else lines
    prompt_lines: list[str] = []
    negative_lines: list[str] = []
    in_negative = False
    for line in body:
        if line.startswith(_NEGATIVE):
            in_negative = True
            line = line[len(_NEGATIVE) :].strip()
        (negative_lines if in_negative else prompt_lines).append(line)
    settings = {k.strip(): v.strip().strip('"') for k, v in _SETTING.findall(settings_line)}
    warnings: list[str] = []
    values: dict[str, Any] = {
        "prompt": "\n".join(prompt_lines).strip(),
        "negative_prompt": "\n".join(negative_lines).strip(),
    }
    values.update(_a1111_settings(settings, warnings))
    control = _a1111_control(settings, warnings)
    return ParsedParams(GenerationParams(**values), warnings, control)


def _a1111_control(settings: dict[str, str], warnings: list[str]) -> tuple[ControlLayer, ...]:
    """`ControlNet 0: "Module: canny, Model: ..., Weight: 1, Guidance Start: 0, ..."` (the
    extension's other fields, resize mode and the like, are not ours and are ignored)."""
    layers: dict[int, ControlLayer] = {}
    for key, value in settings.items():
        match = _CONTROLNET.fullmatch(key)
        if not match:
            continue
        fields_ = {k.strip(): v.strip() for k, v in _SETTING.findall(value)}
        module = fields_.get("Module", "none")
        try:
            layers[int(match.group(1))] = ControlLayer(
                image="",
                model=_HASH_SUFFIX.sub("", fields_["Model"]),  # "name [d14c016b]": name
                # A1111's preprocessors go by longer names ("canny", "softedge_pidinet"...).
                module=next((m for m in CONTROL_MODULES if module.startswith(m)), "none"),
                weight=float(fields_.get("Weight", 1.0)),
                start=float(fields_.get("Guidance Start", 0.0)),
                end=float(fields_.get("Guidance End", 1.0)),
            )
        except (KeyError, ValueError):
            warnings.append(translate("PngParams", "ignored {key} (unreadable)").format(key=key))
    return tuple(layers[index] for index in sorted(layers))


def _a1111_settings(settings: dict[str, str], warnings: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    numbers = (("Steps", "steps", int), ("CFG scale", "cfg", float), ("Seed", "seed", int))
    for key, name, convert in numbers:
        if key in settings:
            try:
                values[name] = convert(settings[key])
            except ValueError:
                warnings.append(
                    translate("PngParams", "ignored {key} {value} (not a number)").format(
                        key=key, value=repr(settings[key])
                    )
                )
    if "Size" in settings:
        size = settings["Size"].lower().split("x")
        if len(size) == 2 and all(part.isdigit() for part in size):
            values["width"], values["height"] = int(size[0]), int(size[1])
        else:
            warnings.append(
                translate("PngParams", "ignored Size {value}").format(value=repr(settings["Size"]))
            )
    if settings.get("Model"):
        values["model"] = settings["Model"]
    if "Sampler" in settings:
        scheduler = _scheduler_for(settings["Sampler"])
        if scheduler:
            values["scheduler"] = scheduler
        else:
            warnings.append(
                translate("PngParams", "sampler {name} is not available; kept the default").format(
                    name=repr(settings["Sampler"])
                )
            )
    return values


def _scheduler_for(sampler: str) -> str | None:
    name = sampler.strip().lower()
    if name in _SAMPLER_ALIASES:
        return _SAMPLER_ALIASES[name]
    # "DPM++ 2M Karras" -> "DPM++ 2M": the noise schedule variant, same sampler.
    for known in sorted(_SAMPLER_ALIASES, key=len, reverse=True):
        if name.startswith(known + " "):
            return _SAMPLER_ALIASES[known]
    return None
