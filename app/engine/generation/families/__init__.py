"""Model families behind one interface (`ModelFamily`); `family_of` picks a pipeline's.

The denoise loop asks the family (chosen once per job) how to encode, start, step and
decode; it never branches on the model. A new family is a module here with one class,
and one line in `_pipeline_families`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.engine.generation.errors import UnsupportedModel
from app.engine.generation.families.base import Conditioning, ModelFamily, Schedule
from app.engine.generation.families.flux import FluxFamily
from app.engine.generation.families.klein import Flux2KleinFamily
from app.engine.generation.families.sd import StableDiffusionFamily
from app.engine.generation.families.sd3 import StableDiffusion3Family
from app.engine.generation.families.sdxl import StableDiffusionXLFamily
from app.engine.generation.families.zimage import ZImageFamily

__all__ = ["Conditioning", "ModelFamily", "Schedule", "family_label", "family_of"]

_LABELS = {
    family.name: family.label
    for family in (
        StableDiffusionFamily,
        StableDiffusionXLFamily,
        StableDiffusion3Family,
        FluxFamily,
        ZImageFamily,
        Flux2KleinFamily,
    )
}


def _pipeline_families() -> list[tuple[tuple[type[Any], ...], Callable[[Any], ModelFamily]]]:
    """(diffusers pipeline classes, the family that drives them)."""
    from diffusers import (
        Flux2KleinPipeline,
        FluxImg2ImgPipeline,
        FluxInpaintPipeline,
        FluxPipeline,
        StableDiffusion3Img2ImgPipeline,
        StableDiffusion3Pipeline,
        StableDiffusionImg2ImgPipeline,
        StableDiffusionPipeline,
        StableDiffusionXLImg2ImgPipeline,
        StableDiffusionXLPipeline,
        ZImageImg2ImgPipeline,
        ZImagePipeline,
    )

    return [
        ((StableDiffusionXLPipeline, StableDiffusionXLImg2ImgPipeline), StableDiffusionXLFamily),
        ((StableDiffusionPipeline, StableDiffusionImg2ImgPipeline), StableDiffusionFamily),
        ((StableDiffusion3Pipeline, StableDiffusion3Img2ImgPipeline), StableDiffusion3Family),
        ((FluxPipeline, FluxImg2ImgPipeline, FluxInpaintPipeline), FluxFamily),
        ((ZImagePipeline, ZImageImg2ImgPipeline), ZImageFamily),
        ((Flux2KleinPipeline,), Flux2KleinFamily),
    ]


def family_of(pipe: Any) -> ModelFamily:
    """The family that drives `pipe`; `UnsupportedModel` for a pipeline of no family."""
    for classes, family in _pipeline_families():
        if isinstance(pipe, classes):
            return family(pipe)
    raise UnsupportedModel(f"no model family drives a {type(pipe).__name__}")


def family_label(name: str) -> str:
    """What to call the family a checkpoint names (`ModelFamily.name`) in a message."""
    return _LABELS.get(name, f"unknown ({name!r})")
