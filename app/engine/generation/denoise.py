"""Our own denoising loop, step by step, the same for every model family.

The stock pipelines cannot stop and resume exactly (multistep history and generator state
are internal), so we drive their components ourselves. What differs between models (how
a prompt is encoded, the latents prepared, the model called, the latents decoded, which
tensors a checkpoint carries) is the job of the pipeline's `ModelFamily`, chosen once per
job (`families.family_of`); each drives its components as its stock pipeline does, which
keeps results bit-identical to the stock pipelines. The loop never branches on the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from PIL import Image

from app.engine.generation.errors import CheckpointCorrupt, CheckpointMismatch
from app.engine.generation.families import family_label, family_of
from app.engine.generation.families.base import Conditioning, ModelFamily
from app.engine.generation.files.architecture import size_problem
from app.engine.generation.guidance.control import ControlGuide, make_guide
from app.engine.generation.loop import step_cache
from app.engine.generation.loop.checkpoint import Checkpoint
from app.engine.generation.loop.inpaint import MaskedImage, masked_image
from app.engine.generation.loop.schedulers import (
    SCHEDULER_CLASSES,
    load_scheduler_state,
    make_scheduler,
    scheduler_state,
)
from app.engine.jobs.params import KIND_EDIT, GenerationParams, InvalidParameters

__all__ = [
    "SCHEDULER_CLASSES",
    "DenoiseState",
    "advance",
    "decode",
    "make_scheduler",
    "new_generator",
    "restore",
    "snapshot",
    "start",
]


@dataclass
class DenoiseState:
    family: ModelFamily
    scheduler: Any
    timesteps: torch.Tensor
    index: int  # next timestep to run
    steps_done: int  # completed scheduler steps (progress)
    total_steps: int
    latents: torch.Tensor
    conditioning: Conditioning  # the family's (prompt embeddings and the like)
    generator: torch.Generator
    guidance: float
    do_cfg: bool
    denoised: torch.Tensor | None = None  # the scheduler's x0 estimate, for previews
    masked: MaskedImage | None = None  # inpaint: the image and mask, to paste back
    control: ControlGuide | None = None  # ControlNet layers (from the job's inputs)
    cached_pipe: Any = None  # the pipeline whose transformer holds the job's step cache

    @property
    def finished(self) -> bool:
        return self.index >= len(self.timesteps)


def new_generator(seed: int) -> torch.Generator:
    # Always a CPU generator: the same seed gives the same noise on every device, and its
    # state can be saved and restored across devices.
    return torch.Generator(device="cpu").manual_seed(seed)


@torch.no_grad()
def start(
    pipe: Any,
    params: GenerationParams,
    init_image: bytes | None = None,
    mask: bytes | None = None,
    control_nets: Sequence[Any] = (),
    control_images: Sequence[bytes] = (),
    reference_images: Sequence[bytes] = (),
    edit_images: Sequence[bytes] = (),
    last_image: bytes | None = None,
) -> DenoiseState:
    """The state before the first step; from noise, or (img2img) from `init_image`'s PNG,
    (a first-and-last-frame clip) with `last_image`'s PNG as its last frame,
    or (inpaint) from `init_image` where `mask`'s PNG is black; guided by `control_nets`
    (loaded ControlNets) on `control_images` (PNGs), in `params.control`'s layer order,
    and by `reference_images` (PNGs) through the IP-Adapter or Redux model the pipeline holds.
    An edit reads `init_image` and then `edit_images` (PNGs), its further input images."""
    family = family_of(pipe)
    problem = size_problem(family.native_size(), params.width, params.height)
    if problem:
        raise InvalidParameters(problem)
    step_cache.prepare(pipe, family.name, params)
    scheduler = family.scheduler(params)
    do_cfg = family.uses_cfg(params)
    conditioning = family.encode(params, do_cfg)
    conditioning.update(family.encode_references(reference_images, do_cfg, conditioning))
    if params.kind == KIND_EDIT and init_image is not None:
        conditioning.update(family.encode_edit(params, (init_image, *edit_images), do_cfg))
    generator = new_generator(params.seed)
    masked = _masked(params, init_image, mask)
    # Before the noise: Flux.1's ControlNet images are VAE-sampled from the generator first.
    control = make_guide(
        pipe, params, control_nets, control_images, do_cfg, _crop(masked), generator
    )
    # Only a family that takes a last frame is handed one (submit refuses it elsewhere).
    last = {} if last_image is None else {"last_image": last_image}
    schedule = family.initial_latents(
        scheduler, params, generator, init_image, conditioning, masked, **last
    )
    return DenoiseState(
        family=family,
        scheduler=scheduler,
        timesteps=schedule.timesteps,
        index=0,
        steps_done=0,
        total_steps=schedule.total_steps,
        latents=schedule.latents,
        conditioning=conditioning,
        generator=generator,
        guidance=params.cfg,
        do_cfg=do_cfg,
        masked=masked,
        control=_over(control, len(schedule.timesteps)),
        cached_pipe=_cached(pipe, params),
    )


def _over(control: ControlGuide | None, timesteps: int) -> ControlGuide | None:
    return None if control is None else control.over(timesteps)


def _cached(pipe: Any, params: GenerationParams) -> Any:
    return pipe if params.cache_threshold else None


def _masked(
    params: GenerationParams, init_image: bytes | None, mask: bytes | None
) -> MaskedImage | None:
    if mask is None:
        return None
    if init_image is None:
        raise InvalidParameters("a mask needs an image to inpaint")
    return masked_image(params, init_image, mask)


def _crop(masked: MaskedImage | None) -> tuple[int, int, int, int] | None:
    return None if masked is None else masked.crop


def restore(
    pipe: Any,
    params: GenerationParams,
    checkpoint: Checkpoint,
    init_image: bytes | None = None,
    mask: bytes | None = None,
    control_nets: Sequence[Any] = (),
    control_images: Sequence[bytes] = (),
) -> DenoiseState:
    """The state a checkpoint was taken in, on this pipeline's device and dtype; the inputs
    only say where an "only masked" inpaint is pasted back (the rest is in the checkpoint)
    and, for ControlNet, what guides the remaining steps (prepared as at the start)."""
    family = family_of(pipe)
    device, dtype = family.device, family.dtype
    scheduler = family.scheduler(params)
    _check_fits(family, params, checkpoint, scheduler)
    generator = new_generator(params.seed)
    try:
        generator.set_state(checkpoint.generator_state)
    except RuntimeError as error:
        raise CheckpointCorrupt(f"checkpoint has a damaged generator state: {error}") from error
    timesteps, steps = family.resumed_schedule(scheduler, params)
    masked = _masked(params, init_image, mask)
    # After the schedule: img2img's trimming sets a begin index that the saved one replaces.
    load_scheduler_state(scheduler, checkpoint.scheduler_state, device)
    step_cache.prepare(pipe, family.name, params)
    step_cache.load(pipe, checkpoint.step_cache, checkpoint.index)
    # Prepared as at the start, from a generator as fresh as the start's.
    control = make_guide(
        pipe, params, control_nets, control_images, family.uses_cfg(params), _crop(masked),
        new_generator(params.seed),
    )  # fmt: skip
    return DenoiseState(
        family=family,
        scheduler=scheduler,
        timesteps=timesteps,
        index=checkpoint.index,
        steps_done=checkpoint.steps_done,
        total_steps=steps,
        latents=checkpoint.latents.to(device, dtype),
        conditioning={k: v.to(device, dtype) for k, v in checkpoint.conditioning.items()},
        generator=generator,
        guidance=params.cfg,
        do_cfg=family.uses_cfg(params),
        masked=masked,
        control=_over(control, len(timesteps)),
        cached_pipe=_cached(pipe, params),
    )


def _check_fits(
    family: ModelFamily, params: GenerationParams, checkpoint: Checkpoint, scheduler: Any
) -> None:
    """Params match already; this catches a model swapped under the same name."""
    if checkpoint.family != family.name:
        raise CheckpointMismatch(
            f"checkpoint was made by an {family_label(checkpoint.family)} model; "
            f"this model is {family.label}"
        )
    needed = family.checkpoint_needs(params)
    missing = [name for name in needed if name not in checkpoint.conditioning]
    if missing:
        raise CheckpointMismatch(f"checkpoint lacks the {family.label} {', '.join(missing)}")
    expected = type(scheduler).__name__
    if checkpoint.scheduler_class != expected:
        raise CheckpointMismatch(
            f"checkpoint uses scheduler {checkpoint.scheduler_class}, not {expected}"
        )
    shape = family.latent_shape(params)
    if tuple(checkpoint.latents.shape) != shape:
        raise CheckpointMismatch(
            f"checkpoint latents {tuple(checkpoint.latents.shape)} do not fit this model "
            f"and size {shape}"
        )
    if not 0 <= checkpoint.index <= len(scheduler.timesteps):
        raise CheckpointCorrupt(f"checkpoint step index {checkpoint.index} is out of range")


def snapshot(state: DenoiseState, params: GenerationParams, elapsed_s: float) -> Checkpoint:
    return Checkpoint(
        params=params.to_dict(),
        steps_done=state.steps_done,
        index=state.index,
        elapsed_s=elapsed_s,
        latents=state.latents,
        generator_state=state.generator.get_state(),
        family=state.family.name,
        conditioning=dict(state.conditioning),
        scheduler_class=type(state.scheduler).__name__,
        scheduler_state=scheduler_state(state.scheduler),
        step_cache={} if state.cached_pipe is None else step_cache.saved(state.cached_pipe),
    )


@torch.no_grad()
def advance(pipe: Any, state: DenoiseState) -> bool:
    """Run one timestep; True when that completed a scheduler step (a safe point to stop).

    `pipe` is the one `state` was started on; its family does the model's part."""
    t = state.timesteps[state.index]
    noise_pred = state.family.predict(
        state.scheduler, state.latents, t, state.conditioning, state.guidance, state.do_cfg,
        state.control, state.index,
    )  # fmt: skip
    output = state.family.step(
        state.scheduler, noise_pred, t, state.latents, state.generator, state.conditioning
    )
    state.latents = state.family.after_step(
        state.scheduler, output.prev_sample, state.timesteps, state.index, state.conditioning
    )
    state.denoised = _x0_estimate(state.scheduler, output)
    state.index += 1
    if _is_step_boundary(state):
        state.steps_done += 1
        return True
    return False


@torch.no_grad()
def decode(pipe: Any, state: DenoiseState) -> Image.Image:
    image = state.family.decode(state.latents, state.generator)
    return state.family.finish(image, state.masked)


def _x0_estimate(scheduler: Any, output: Any) -> torch.Tensor | None:
    """The scheduler's guess of the final latents (a clean preview), if it exposes one."""
    estimate = getattr(output, "pred_original_sample", None)
    if estimate is None and str(getattr(scheduler.config, "algorithm_type", "")).endswith("++"):
        history = getattr(scheduler, "model_outputs", None) or [None]
        estimate = history[-1]  # DPM-Solver++ keeps its x0 predictions as model_outputs
    return estimate


def _is_step_boundary(state: DenoiseState) -> bool:
    """The stock pipeline's progress rule: 2nd-order schedulers run 2 timesteps per step."""
    order = getattr(state.scheduler, "order", 1)
    warmup = len(state.timesteps) - state.total_steps * order
    return state.finished or (state.index > warmup and state.index % order == 0)
