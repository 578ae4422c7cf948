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
_CONTROLNET = re.compile(r"ControlNet (\d+)")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_SHOWN_VALUE_CHARS = 40  # a value quoted in a warning (the text comes from a stranger's file)


class NoParameters(ValueError):
    """The file carries no generation parameters we can read; the message says why."""


class ParametersTooLong(NoParameters):
    """The file's parameters text is over the size Easel reads; the image itself is fine."""


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
    one of `controlnets` (default: the ones installed).

    The file may come from anyone: its text is read within a size limit (a larger
    parameters text is `ParametersTooLong`; the picture itself is still usable) and parsed in
    time linear in its length. It reads the file: call it off the GUI thread."""
    from app.engine.jobs.image_text import UnreadableImage, read_image_text

    try:
        found = read_image_text(path)
    except UnreadableImage as error:  # also a picture too large to open
        raise NoParameters(
            translate("PngParams", "{name} is not a readable image: {error}").format(
                name=path.name, error=error
            )
        ) from None
    for key in (EASEL_KEY, A1111_KEY):
        if key in found.refused and key not in found.texts:
            raise ParametersTooLong(f"{path.name}: {found.refused[key]}")
    parsed = params_from_text_chunks(found.texts, name=path.name)
    if parsed.control:
        if controlnets is None:
            from app.engine.generation.guidance.controlnets import list_controlnets

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
    except RecursionError:  # nested beyond reason: JSON from a stranger's file
        raise NoParameters(
            translate("PngParams", "the easel parameters are not valid JSON (nested too deeply)")
        ) from None
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
        if values.pop("edit_images", ""):  # an edit's further pictures: not in the PNG either
            warnings.append(
                translate(
                    "PngParams",
                    "the edit's further input images are not in the PNG; add them again",
                )
            )
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
    settings = {k.strip(): v.strip().strip('"') for k, v in settings_pairs(settings_line)}
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
        fields_ = {k.strip(): v.strip() for k, v in settings_pairs(value)}
        module = fields_.get("Module", "none")
        try:
            layers[int(match.group(1))] = ControlLayer(
                image="",
                model=_without_hash(fields_["Model"]),  # "name [d14c016b]": name
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
                        key=key, value=_shown(settings[key])
                    )
                )
    if "Size" in settings:
        size = settings["Size"].lower().split("x")
        if len(size) == 2 and all(part.isdigit() for part in size):
            values["width"], values["height"] = int(size[0]), int(size[1])
        else:
            warnings.append(
                translate("PngParams", "ignored Size {value}").format(
                    value=_shown(settings["Size"])
                )
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
                    name=_shown(settings["Sampler"])
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


# --------------------------------------------------------------------- the settings line
# A1111 writes `Key: value, Key: "quoted, with commas", ...`. This was read with findall of
#     \s*([\w ]+?):\s*("(?:[^"\\]|\\.)*"|[^,]*)(?:,|$)
# which, where a match fails, tries again one character on: along a run of words without a
# colon each try scans the rest of the run, and the \s* before the key gives its spaces back
# one by one, so the time grew with the square of the length (64 KB: 33 s, on the GUI
# thread). The same pairs (a test compares the two on many strings) now come from one pass:
# the whitespace before a key is atomic (it gives back only the single space that a key
# " " needs, which the old pattern also found), and where a pair fails, `skip` consumes the
# run that failed, every position in it failing the same way, and the runs after it that
# end in neither a colon nor whitespace ("a,a,a,..." in one step).
_PAIR_OR_SKIP = re.compile(
    r"""(?P<pair>(?>\s*?(?=\ :)|\s*)(?P<key>[\w ]+?):"""
    r"""\s*(?P<value>"(?:[^"\\]|\\.)*"|[^,]*)(?:,|$))"""
    r"""|(?P<skip>(?:(?>\s*)(?>[\w ]*)[^:\w\s])+|(?>\s*)(?:[\w ]+|\S)?)"""
)


def settings_pairs(line: str) -> list[tuple[str, str]]:
    """(key, raw value) pairs of an A1111 settings line, in one pass over it."""
    return [
        (found["key"], found["value"])
        for found in _PAIR_OR_SKIP.finditer(line)
        if found["pair"] is not None
    ]


def _without_hash(model: str) -> str:
    """ "name [d14c016b]" -> "name": A1111's hash suffix, if any, and the spaces before it."""
    body = model.removesuffix("\n")  # as the regex's $ did: before a last newline too
    opening = body.rfind("[")
    digits = body[opening + 1 : -1]
    if body.endswith("]") and opening >= 0 and digits and set(digits) <= _HEX_DIGITS:
        return body[:opening].rstrip() + model[len(body) :]
    return model


def _shown(value: str) -> str:
    """A value from the file as a warning quotes it: short."""
    if len(value) > _SHOWN_VALUE_CHARS:
        return repr(value[:_SHOWN_VALUE_CHARS] + "…")
    return repr(value)
