"""What the flow-matching families (SD 3.x, Flux) share: their scheduler, set as their stock
pipelines set it, and img2img's trimmed schedule.

Their one scheduler is diffusers' `FlowMatchEulerDiscreteScheduler`, built from the
model's own scheduler config (its `shift`, or dynamic shifting with the `mu` the family
computes) and offered under A1111's name "Euler" (`flow_checks.FLOW_SAMPLERS`). A
checkpoint keeps its step index only (`schedulers.KINDS`): sigmas and timesteps are rebuilt
by `set_timesteps` from the same steps and `mu`.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers import FlowMatchEulerDiscreteScheduler

from app.engine.generation.flow_checks import sampler_problem
from app.engine.jobs.params import GenerationParams, InvalidParameters


def flow_scheduler(
    pipe: Any, params: GenerationParams, label: str, mu: float | None = None
) -> FlowMatchEulerDiscreteScheduler:
    """A fresh scheduler from the model's config, its timesteps set as the stock pipelines'
    `retrieve_timesteps(scheduler, steps, device, mu=mu)` sets them; `InvalidParameters`
    for a sampler flow matching has not (`label`: the family's, for the sentence)."""
    if problem := sampler_problem(params.scheduler, label):
        raise InvalidParameters(problem)
    scheduler = FlowMatchEulerDiscreteScheduler.from_config(pipe.scheduler.config)
    kwargs = {} if mu is None else {"mu": mu}
    scheduler.set_timesteps(params.steps, device=pipe._execution_device, **kwargs)
    return scheduler


def trim_schedule(scheduler: Any, params: GenerationParams) -> tuple[torch.Tensor, int]:
    """img2img's timesteps and steps, as the flow pipelines' `get_timesteps`: unlike the
    UNet pipelines they skip `int(steps - steps * strength)` steps (the product is not
    rounded down first), so 4 steps at strength 0.6 run 3 steps here, 2 on SD 1.x."""
    init_timestep = min(params.steps * params.strength, params.steps)
    t_start = int(max(params.steps - init_timestep, 0))
    timesteps = scheduler.timesteps[t_start * scheduler.order :]
    scheduler.set_begin_index(t_start * scheduler.order)
    return timesteps, params.steps - t_start
