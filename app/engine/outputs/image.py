"""The image kind: a finished image as a PNG file, with the parameters AUTOMATIC1111 writes
into it (no torch). The only place that knows an output is a PNG."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from app.durable import atomic_write
from app.engine.jobs.params import (
    KIND_EDIT,
    KIND_GENERATE,
    KIND_GRID,
    KIND_TILED,
    KIND_UPSCALE,
    GenerationParams,
)
from app.engine.outputs.kinds import FileKind, GalleryLook, OutputKind
from app.engine.outputs.png_star import set_png_star

if TYPE_CHECKING:
    from PIL import Image


def a1111_parameters(params: GenerationParams) -> str:
    """The `parameters` text AUTOMATIC1111 writes, so other tools can read our PNGs."""
    lines = [params.prompt]
    if params.negative_prompt:
        lines.append(f"Negative prompt: {params.negative_prompt}")
    lines.append(
        f"Steps: {params.steps}, Sampler: {params.scheduler}, CFG scale: {params.cfg:g}, "
        f"Seed: {params.seed}, Size: {params.width}x{params.height}, Model: {params.model}"
        + _image_parameters(params)
        + _inpaint_parameters(params)
        + (
            f", Variation seed: {params.variation_seed}, "
            f"Variation seed strength: {params.variation_strength:g}"
            if params.variation_strength > 0
            else ""
        )
        + (f", Upscaler: {params.upscaler}" if params.upscaler else "")
        + _control_parameters(params)
        + "".join(
            f', IP-Adapter {index}: "Model: {reference.model}, Weight: {float(reference.weight)!r}"'
            for index, reference in enumerate(params.references)
        )
        + _speed_parameters(params)
        + (", Compile: torch.compile" if params.compile else "")
        + _schedule_parameters(params)
    )
    if params.prompt_template and params.prompt_template != params.prompt:
        # As the Dynamic Prompts extension records the prompt before it was expanded.
        lines.append(f"Template: {params.prompt_template}")
    return "\n".join(lines)


def _image_parameters(params: GenerationParams) -> str:
    """An img2img's strength as A1111 writes it; an edit's input images instead (the prompt
    is its instruction; `upload:<sha256>` or `job:<id>`, the job whose image it edits, then
    each further input image's `upload:<sha256>`, as "Edit image 2", "Edit image 3")."""
    if params.kind == KIND_EDIT:
        more = params.more_edit_images
        return f", Edit image: {params.init_image}" + "".join(
            f", Edit image {index}: {name}" for index, name in enumerate(more, start=2)
        )
    return f", Denoising strength: {params.strength:g}" if params.init_image else ""


def _control_parameters(params: GenerationParams) -> str:
    """Each control layer as A1111's ControlNet extension writes it (`ControlNet 0: "..."`)."""
    return "".join(
        f', ControlNet {index}: "Module: {layer.module}, Model: {layer.model}, '
        f"Weight: {float(layer.weight)!r}, Guidance Start: {float(layer.start)!r}, "
        f'Guidance End: {float(layer.end)!r}"'
        for index, layer in enumerate(params.control_layers)
    )


def _speed_parameters(params: GenerationParams) -> str:
    """Step caching: the setting and the First Block Cache threshold it ran with."""
    if not params.cache_threshold:
        return ""
    return f", Speed: {params.speed}, First Block Cache threshold: {params.cache_threshold:g}"


def _schedule_parameters(params: GenerationParams) -> str:
    """The schedule over the model's (a few-step LoRA's), quoted as A1111 quotes a value
    with commas: its JSON as a JSON string. The `easel` chunk has it too, exactly."""
    if not params.scheduler_config:
        return ""
    return f", Scheduler config: {json.dumps(params.scheduler_config)}"


def _inpaint_parameters(params: GenerationParams) -> str:
    """An inpaint's settings, worded as A1111 writes them."""
    if not params.is_inpaint:
        return ""
    text = f", Mask blur: {params.mask_blur}"
    if params.only_masked:
        text += f", Inpaint area: Only masked, Masked area padding: {params.mask_padding}"
    return text


def write_png(
    image: Image.Image,
    path: Path,
    params: GenerationParams,
    *,
    extra_parameters: str = "",
    chunks: Mapping[str, str] | None = None,
    compress_level: int = 6,
) -> None:
    """Save `image` atomically with its parameters as `parameters` and `easel` text chunks.

    `extra_parameters`: appended to the settings line of `parameters` (a grid's axes, as
    A1111 writes them); `chunks`: more text chunks (a grid's `easel-grid`);
    `compress_level`: zlib's, 6 as PIL's default (a grid takes 1: see `grid_run`)."""
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    text = a1111_parameters(params)
    if extra_parameters:
        first, _, rest = text.partition("\nTemplate: ")
        text = f"{first}, {extra_parameters}" + (f"\nTemplate: {rest}" if rest else "")
    info.add_text("parameters", text)
    info.add_text("easel", json.dumps(params.to_dict(), sort_keys=True))
    for key, value in (chunks or {}).items():
        info.add_text(key, value)
    atomic_write(
        path,
        lambda handle: image.save(
            handle, format="PNG", pnginfo=info, compress_level=compress_level
        ),
    )


def _the_file_itself(path: Path) -> Path:
    return path  # a PNG is its own thumbnail's source, read scaled down while decoding


IMAGE = OutputKind(
    name="image",
    suffix=".png",
    media_type="image/png",
    file_kind=FileKind("image"),  # the value job_file rows have held since schema 6
    job_kinds=(KIND_GENERATE, KIND_GRID, KIND_UPSCALE, KIND_TILED, KIND_EDIT),
    write=write_png,
    still=_the_file_itself,
    gallery=GalleryLook(badge="", in_viewer=True),
    is_picture=True,
    record_star=set_png_star,
)
