"""The A1111 scheduler kinds, and the explicit state a checkpoint keeps of each.

A scheduler rebuilt on resume (from the model's config, `set_timesteps` with the job's
steps) equals the original in everything but what its steps changed: where it is in its
schedule and, for multistep solvers, the history of earlier model outputs. That is all a
checkpoint stores, under names of our own, so a diffusers release that renames or adds a
private attribute cannot make an old checkpoint resume to a different image unnoticed:
`tests/engine/generation/test_scheduler_state.py` replays every kind from its saved state.

The step index is read with the public `step_index` property and restored with the public
`set_begin_index`: a scheduler whose index is unset takes its begin index at its next step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from diffusers import (
    DDIMScheduler,
    DPMSolverMultistepScheduler,
    EulerAncestralDiscreteScheduler,
    EulerDiscreteScheduler,
    FlowMatchEulerDiscreteScheduler,
    HeunDiscreteScheduler,
    UniPCMultistepScheduler,
)

from app.engine.generation.errors import CheckpointCorrupt, CheckpointMismatch
from app.engine.jobs.params import decode_scheduler_config

SCHEDULER_CLASSES: dict[str, type[Any]] = {
    "Euler": EulerDiscreteScheduler,
    "Euler a": EulerAncestralDiscreteScheduler,
    "DDIM": DDIMScheduler,
    "DPM++ 2M": DPMSolverMultistepScheduler,
    "DPM++ 2M Karras": DPMSolverMultistepScheduler,
    "Euler Karras": EulerDiscreteScheduler,
    # A1111's UniPC; also the scheduler the released Wan folders ship (flow sigmas).
    "UniPC": UniPCMultistepScheduler,
}
# What a kind sets over the model's scheduler config: A1111's "Karras" is the noise
# schedule of Karras et al. (2022), diffusers' `use_karras_sigmas`. The state between steps
# is the class's, so KINDS needs nothing more for them.
SCHEDULER_OPTIONS: dict[str, dict[str, Any]] = {
    "DPM++ 2M Karras": {"use_karras_sigmas": True},
    "Euler Karras": {"use_karras_sigmas": True},
}

STEP_INDEX = "step_index"


@dataclass(frozen=True)
class SchedulerKind:
    """What of a scheduler's state its steps change, beyond what `set_timesteps` rebuilds."""

    indexed: bool = True  # keeps a step index (DDIM finds its place from the timestep alone)
    history: tuple[str, ...] = ()  # public attributes carried from one step to the next


KINDS: dict[type[Any], SchedulerKind] = {
    EulerDiscreteScheduler: SchedulerKind(),
    EulerAncestralDiscreteScheduler: SchedulerKind(),  # its noise comes from the job's generator
    DDIMScheduler: SchedulerKind(indexed=False),
    DPMSolverMultistepScheduler: SchedulerKind(history=("model_outputs", "lower_order_nums")),
    # Not an A1111 kind here, but the shape of a 2nd-order one (the step-counting tests use it):
    # its first half-step leaves the derivative and sample for the second.
    HeunDiscreteScheduler: SchedulerKind(history=("prev_derivative", "dt", "sample")),
    # The flow-matching families' Euler (Flux.1, SD 3.x; `families.flow`): its sigmas are
    # rebuilt by `set_timesteps` from the job's steps and size, and kept anyway, so the
    # resumed steps walk the very schedule the first ones did.
    FlowMatchEulerDiscreteScheduler: SchedulerKind(history=("sigmas",)),
    # UniPC's predictor-corrector: the last outputs and their timesteps, the sample the next
    # step corrects, and the order it ran at (the corrector reuses it).
    UniPCMultistepScheduler: SchedulerKind(
        history=("model_outputs", "timestep_list", "lower_order_nums", "last_sample", "this_order")
    ),
}


def make_scheduler(pipe: Any, name: str, config: str = "") -> Any:
    """A fresh scheduler of the A1111 kind `name`, from the model's own scheduler config
    (with `config`'s values over it: a job's `scheduler_config`, a few-step LoRA's)."""
    try:
        cls = SCHEDULER_CLASSES[name]
    except KeyError:
        raise ValueError(
            f"unknown scheduler {name!r} (known: {', '.join(SCHEDULER_CLASSES)})"
        ) from None
    overrides = decode_scheduler_config(config, takes_timesteps=False)
    options = {**SCHEDULER_OPTIONS.get(name, {}), **overrides}
    return cls.from_config(pipe.scheduler.config, **options)


def kind_of(scheduler: Any) -> SchedulerKind:
    try:
        return KINDS[type(scheduler)]
    except KeyError:  # a bug: a scheduler was added without saying what a checkpoint keeps
        raise TypeError(
            f"no checkpoint state is declared for {type(scheduler).__name__} (see KINDS)"
        ) from None


def scheduler_state(scheduler: Any) -> dict[str, Any]:
    """The state of `scheduler` a checkpoint needs, by our own names."""
    kind = kind_of(scheduler)
    state = {name: getattr(scheduler, name) for name in kind.history}
    if kind.indexed:
        state[STEP_INDEX] = scheduler.step_index
    return state


def load_scheduler_state(scheduler: Any, state: dict[str, Any], device: torch.device) -> None:
    """Put `state` (from `scheduler_state`) into a scheduler fresh from `set_timesteps`.

    Raises `CheckpointMismatch` when `state` lacks what this kind needs (made by another
    Easel for another kind) and `CheckpointCorrupt` for a step index that is no number.
    """
    kind = kind_of(scheduler)
    wanted = (*kind.history, STEP_INDEX) if kind.indexed else kind.history
    missing = [name for name in wanted if name not in state]
    if missing:
        raise CheckpointMismatch(
            f"checkpoint lacks the {type(scheduler).__name__} state {', '.join(missing)}"
        )
    for name in kind.history:
        current = getattr(scheduler, name, None)
        # Keep each tensor where the scheduler itself keeps it (e.g. Euler's sigmas on the CPU).
        target = current.device if isinstance(current, torch.Tensor) else device
        setattr(scheduler, name, _to_device(state[name], target))
    if kind.indexed:
        _load_step_index(scheduler, state[STEP_INDEX])


def _load_step_index(scheduler: Any, index: Any) -> None:
    if index is None:
        return  # saved before its first step: it finds its place as a fresh one does
    if not isinstance(index, int) or isinstance(index, bool):
        raise CheckpointCorrupt(f"checkpoint has a bad scheduler step index {index!r}")
    scheduler.set_begin_index(index)


def _to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [_to_device(item, device) for item in value]
    return value
