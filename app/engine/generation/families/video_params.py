"""What the video families make of a video job's `GenerationParams`, torch-free.

A video family's package declares, beside its `FAMILIES`, `VIDEO`: the `VideoRequests` of
each of its architectures (how many frames its VAE packs into one latent frame, its
default count and rate). `request_checks.check_runnable` asks `video_problems` at
submit, so a frame count the model cannot draw, or a video asked of an image model,
is one sentence then, never a FAILED job later. (When the families' declarations become
per-family objects, `VideoRequests` is a field of the declaration; until then it is found
here, by the same package walk as `files.registry.families`.)
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from app.engine.generation.files.registry import FAMILIES_PACKAGE, Architecture
from app.engine.jobs.params import KIND_VIDEO, MAX_FRAMES

if TYPE_CHECKING:
    from app.engine.jobs.params import GenerationParams


@dataclass(frozen=True)
class VideoRequests:
    """What a video model takes."""

    frame_step: int  # frames per latent frame after the first: counts of frame_step*k + 1
    default_frames: int  # the stock pipeline's default count (Wan 2.1: 81, 5 s at 16 fps)
    default_fps: int  # the rate its clips were trained at


@cache
def video_families() -> dict[Architecture, VideoRequests]:
    """Every architecture that draws video, as its package declares it (`VIDEO`)."""
    package = importlib.import_module(FAMILIES_PACKAGE)
    found: dict[Architecture, VideoRequests] = {}
    for module in pkgutil.iter_modules(package.__path__):
        if module.ispkg:
            declared = importlib.import_module(f"{FAMILIES_PACKAGE}.{module.name}")
            found.update(getattr(declared, "VIDEO", {}))
    return found


def nearest_frame_counts(frames: int, step: int) -> tuple[int, ...]:
    """The valid counts (step*k + 1) nearest `frames`: the one below and the one above."""
    below = (frames - 1) // step * step + 1
    counts = [count for count in (below, below + step) if 1 <= count <= MAX_FRAMES]
    return tuple(counts)


def video_problems(architecture: Architecture | None, params: GenerationParams) -> list[str]:
    """Every reason `params` cannot run on a model of `architecture` as far as video goes:
    a video asked of an image model, an image of a video model, a frame count the model's
    VAE cannot pack (one sentence each; sizes are its `Requests.size_multiple`)."""
    label = architecture.label if architecture is not None else "this"
    takes = video_families().get(architecture) if architecture is not None else None
    if params.kind != KIND_VIDEO:
        if takes is not None:
            return [f"{label} models draw videos, not images; ask for a video and its frames"]
        return []
    if takes is None:
        return [f"{label} models draw images, not videos; choose a video model ({_labels()})"]
    problems = []
    step = takes.frame_step
    if params.frames % step != 1 % step:
        counts = " or ".join(str(count) for count in nearest_frame_counts(params.frames, step))
        problems.append(
            f"{label} draws {step}k+1 frames, not {params.frames}; the nearest are {counts}"
        )
    return problems


def _labels() -> str:
    """ "Wan 2.1": the video families, as a refusal names them (never falling behind)."""
    return " or ".join(architecture.label for architecture in video_families())
