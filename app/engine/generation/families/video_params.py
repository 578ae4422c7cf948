"""What the video families make of a video job's `GenerationParams`, torch-free.

A video family declares `FamilySpec.video`: its `VideoRequests` (how many frames its VAE
packs into one latent frame, its default count and rate). `request_checks.check_runnable`
asks `video_problems` at submit, so a frame count the model cannot draw, or a video asked
of an image model, is one sentence then, never a FAILED job later."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.engine.generation.files.registry import Architecture, VideoRequests, families
from app.engine.jobs.params import KIND_VIDEO, MAX_FRAMES

if TYPE_CHECKING:
    from app.engine.jobs.params import GenerationParams


def video_families() -> dict[Architecture, VideoRequests]:
    """Every architecture that draws video, as its declaration says (`FamilySpec.video`)."""
    return {spec.architecture: spec.video for spec in families() if spec.video is not None}


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
    problems = _image_problems(label, takes, params)
    step = takes.frame_step
    if params.frames % step != 1 % step:
        counts = " or ".join(str(count) for count in nearest_frame_counts(params.frames, step))
        problems.append(
            f"{label} draws {step}k+1 frames, not {params.frames}; the nearest are {counts}"
        )
    return problems


def _image_problems(label: str, takes: VideoRequests, params: GenerationParams) -> list[str]:
    """A first image the model needs, a last image it needs or cannot take."""
    if takes.needs_image and not params.init_image:
        return [f"{label} animates an input image: give it one (the init image)"]
    if params.last_image and not takes.takes_last_image:
        return [f"{label} takes no last image; choose a first-and-last-frame model ({_flf()})"]
    if takes.needs_last_image and not params.last_image:
        return [f"{label} draws between a first and a last frame: give it both images"]
    if params.has_condition_settings and not takes.weighs_images:
        return [
            f"{label} takes its images at full strength only; an image strength or a last"
            f" image's frame is for {_weighing()} models"
        ]
    return []


def _flf() -> str:
    """The families that take a last frame, as a refusal names them."""
    found = [a.label for a, takes in video_families().items() if takes.takes_last_image]
    return " or ".join(filter(None, (", ".join(found[:-1]), found[-1])))


def _weighing() -> str:
    """The families that weigh their conditioning images, as a refusal names them."""
    found = [a.label for a, takes in video_families().items() if takes.weighs_images]
    return " or ".join(found)


def _labels() -> str:
    """ "Wan 2.1, Wan 2.1 I2V or Wan 2.2 TI2V": the video families, as a refusal names
    them (never falling behind)."""
    labels = [architecture.label for architecture in video_families()]
    return " or ".join(filter(None, (", ".join(labels[:-1]), labels[-1])))
