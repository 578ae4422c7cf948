"""Model families behind one interface (`ModelFamily`); `family_of` picks a pipeline's.

The denoise loop asks the family (chosen once per job) how to encode, start, step and
decode; it never branches on the model. A new family is a module here with one class,
and one line in `_FAMILIES`.
"""

from __future__ import annotations

from typing import Any

from app.engine.generation.errors import UnsupportedModel
from app.engine.generation.families.base import Conditioning, ModelFamily, Schedule
from app.engine.generation.families.sd import StableDiffusionFamily
from app.engine.generation.families.sdxl import StableDiffusionXLFamily

__all__ = ["Conditioning", "ModelFamily", "Schedule", "family_label", "family_of"]


def _pipeline_classes() -> list[tuple[tuple[type[Any], ...], type[Any]]]:
    from diffusers import (
        StableDiffusionImg2ImgPipeline,
        StableDiffusionPipeline,
        StableDiffusionXLImg2ImgPipeline,
        StableDiffusionXLPipeline,
    )

    return [
        ((StableDiffusionXLPipeline, StableDiffusionXLImg2ImgPipeline), StableDiffusionXLFamily),
        ((StableDiffusionPipeline, StableDiffusionImg2ImgPipeline), StableDiffusionFamily),
    ]


_FAMILIES: dict[str, type[Any]] = {
    family.name: family for family in (StableDiffusionFamily, StableDiffusionXLFamily)
}


def family_of(pipe: Any) -> ModelFamily:
    """The family that drives `pipe`; `UnsupportedModel` for a pipeline of no family."""
    for classes, family in _pipeline_classes():
        if isinstance(pipe, classes):
            found: ModelFamily = family(pipe)
            return found
    raise UnsupportedModel(f"no model family drives a {type(pipe).__name__}")


def family_label(name: str) -> str:
    """The label of the family stored in checkpoints as `name` (for messages)."""
    family = _FAMILIES.get(name)
    return family.label if family is not None else f"unknown ({name!r})"
