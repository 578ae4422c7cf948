"""`submit --control MODULE:IMAGE[:WEIGHT[:START:END]] --control-model NAME`: ControlNet
layers; `--reference IMAGE[:WEIGHT] --reference-model NAME`: reference images (IP-Adapter;
on Flux.1 a Redux model), as many as `--control`, each with its model and weight.

Each `--control` is one layer: its preprocessor (`none` for an image that is a control image
already), the image, and optionally its weight and the share of the steps it acts on. The
n-th `--control-model` names the n-th layer's ControlNet; one for several layers serves
them all. The preprocessor runs here, once: its output is what is stored with the job.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from app.cli.jobs import check_model
from app.engine.jobs.control_image import preprocess, read_control_image
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.params import (
    CONTROL_MODULES,
    UNION_TYPES,
    ControlLayer,
    GenerationParams,
    InvalidParameters,
    ReferenceImage,
    encode_control,
    encode_reference,
)


def add_control_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("ControlNet")
    group.add_argument(
        "--control", action="append", default=[], metavar="MODULE:IMAGE[:WEIGHT[:START:END]]",
        help=f"a control layer (may be given more than once); MODULE: {', '.join(CONTROL_MODULES)}"
        "; WEIGHT 0-2 (default 1); START and END: the share of the steps it guides (0 and 1)",
    )  # fmt: skip
    group.add_argument(
        "--control-model", action="append", default=[], metavar="NAME",
        help="the ControlNet of each --control, in order (one serves them all)",
    )  # fmt: skip
    group.add_argument(
        "--control-type", action="append", default=[], metavar="TYPE",
        help=f"a ControlNet Union's control type for each --control ({', '.join(UNION_TYPES)}), "
        "in order (one serves them "
        "all; default: the preprocessor's kind, canny or softedge)",
    )  # fmt: skip


def add_reference_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reference images (IP-Adapter; Flux.1: Redux)")
    group.add_argument(
        "--reference", action="append", default=[], metavar="IMAGE[:WEIGHT]",
        help="an image whose style or subject guides the job (may be given more than once); "
        "WEIGHT 0-2 (default 1)",
    )  # fmt: skip
    group.add_argument(
        "--reference-model", action="append", default=[], metavar="NAME",
        help="the IP-Adapter (on Flux.1: the Redux model) of each --reference, in order "
        "(one serves them all)",
    )  # fmt: skip


def reference_from_args(
    args: argparse.Namespace, params: GenerationParams
) -> tuple[GenerationParams, list[bytes]]:
    """`params` with the command line's reference images, and their PNGs."""
    if not args.reference:
        if args.reference_model:
            raise InvalidParameters("--reference-model needs --reference IMAGE")
        return params, []
    models = _one_each(args.reference, args.reference_model, "--reference", "model")
    references, pngs = [], []
    for text, model in zip(args.reference, models, strict=True):
        path, weight = text, 1.0
        head, sep, tail = text.rpartition(":")
        if sep and _is_number(tail):
            path, weight = head, float(tail)
        png = preprocess("none", read_control_image(Path(path)))  # checked, stored as RGB PNG
        references.append(ReferenceImage(digest(png), model, weight))
        pngs.append(png)
    params = replace(params, reference=encode_reference(references)).validated()
    check_model(params)  # each IP-Adapter is installed
    return params, pngs


def _one_each(given: list[str], names: list[str], option: str, what: str) -> list[str]:
    """The name for each `option` given: the n-th of `names` (`option`-model, -type) names
    the n-th; one serves all."""
    named = f"{option}-{what}"
    if not names:
        raise InvalidParameters(f"{option} needs {named} NAME (the {what} to use)")
    if len(names) == 1:
        return names * len(given)
    if len(names) != len(given):
        raise InvalidParameters(f"{len(given)} {option} images but {len(names)} {named} names")
    return list(names)


def parse_control(text: str) -> tuple[str, Path, float, float, float]:
    """`canny:pose.png:0.8:0:0.6` -> ("canny", pose.png, 0.8, 0.0, 0.6); a path may hold
    colons itself (only trailing numbers are read as numbers)."""
    module, sep, rest = text.partition(":")
    if not sep or not rest:
        raise InvalidParameters(f"--control {text!r} is not MODULE:IMAGE[:WEIGHT[:START:END]]")
    parts = rest.split(":")
    trailing = 0
    while trailing < min(3, len(parts) - 1) and _is_number(parts[-1 - trailing]):
        trailing += 1
    if trailing == 2:
        raise InvalidParameters(f"--control {text!r}: give WEIGHT, or WEIGHT:START:END")
    numbers = [float(p) for p in parts[len(parts) - trailing :]]
    parts = parts[: len(parts) - trailing]
    weight, start, end = [*numbers, 0.0, 1.0] if len(numbers) == 1 else numbers or [1.0, 0.0, 1.0]
    return module, Path(":".join(parts)), weight, start, end


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def control_from_args(
    args: argparse.Namespace, params: GenerationParams
) -> tuple[GenerationParams, list[bytes]]:
    """`params` with the command line's control layers, and their (preprocessed) images."""
    if not args.control:
        if args.control_model:
            raise InvalidParameters("--control-model needs a --control layer")
        return params, []
    models = _one_each(args.control, args.control_model, "--control", "model")
    kinds = [""] * len(args.control)
    if args.control_type:
        kinds = _one_each(args.control, args.control_type, "--control", "type")
    layers, pngs = [], []
    for text, model, kind in zip(args.control, models, kinds, strict=True):
        module, path, weight, start, end = parse_control(text)
        png = preprocess(module, read_control_image(path))
        layers.append(ControlLayer(digest(png), model, module, weight, start, end, kind))
        pngs.append(png)
    params = replace(params, control=encode_control(layers)).validated()
    check_model(params)  # each ControlNet is installed and made for the model
    return params, pngs
