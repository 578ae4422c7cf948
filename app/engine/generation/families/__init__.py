"""Model families: one package each (`<name>/__init__.py` declares it, torch-free, in
`files.registry`'s terms; `<name>/model.py` drives it behind `ModelFamily`, base.py), and
what they share (unet.py, flow.py, flow_params.py). `family_of` picks a pipeline's driver.

The denoise loop asks the family (chosen once per job) how to encode, start, step and
decode; it never branches on the model. Importing this package loads no torch: the
declarations are read by detection and the window too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.engine.generation.errors import UnsupportedModel
from app.engine.generation.files.registry import families

if TYPE_CHECKING:
    from app.engine.generation.families.base import ModelFamily

__all__ = ["family_label", "family_of"]


def family_of(pipe: Any) -> ModelFamily:
    """The family that drives `pipe`; `UnsupportedModel` for a pipeline of no family. Where
    two families' drivers drive one pipeline class (Wan 2.1 I2V and Wan 2.2 TI2V), each
    driver's `drives(pipe)` says from the pipeline's config whether it is its own."""
    import diffusers

    for spec in families():
        classes = tuple(getattr(diffusers, name) for name in spec.driven_pipelines)
        driver = spec.driver_class() if isinstance(pipe, classes) else None
        if driver is not None and getattr(driver, "drives", lambda _pipe: True)(pipe):
            family: ModelFamily = driver(pipe)
            return family
    raise UnsupportedModel(f"no model family drives a {type(pipe).__name__}")


def family_label(name: str) -> str:
    """What to call the family a checkpoint names (`ModelFamily.name`) in a message."""
    labels = {spec.checkpoint_family: spec.checkpoint_label for spec in families()}
    return labels.get(name, f"unknown ({name!r})")
