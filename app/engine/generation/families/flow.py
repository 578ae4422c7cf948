"""What every flow-matching family (Flux.1, SD 3.x) needs: its sampler, as a scheduler.

The released folders ship a `FlowMatchEulerDiscreteScheduler`, and the stock pipelines
step with it; Easel's "Euler" (its default) is that scheduler, built from the model's own
scheduler config, so it equals the one the stock pipeline holds. The names the flow
families accept are `flow_params.FLOW_SAMPLERS` (torch-free, for the submit-time checks);
the scheduler's checkpoint state (its step index and sigmas) is declared in
`schedulers.KINDS` with the others.
"""

from __future__ import annotations

from typing import Any

from diffusers import FlowMatchEulerDiscreteScheduler

from app.engine.generation.flow_params import sampler_problem
from app.engine.jobs.params import InvalidParameters

SCHEDULER_CLASSES: dict[str, type[Any]] = {"Euler": FlowMatchEulerDiscreteScheduler}


def flow_scheduler(pipe: Any, scheduler: str, label: str) -> Any:
    """A fresh scheduler of the sampler `scheduler` from `pipe`'s scheduler config, its
    timesteps not set yet; `InvalidParameters` for a sampler no flow model takes."""
    problem = sampler_problem(scheduler, label)
    if problem:
        raise InvalidParameters(problem)
    return SCHEDULER_CLASSES[scheduler].from_config(pipe.scheduler.config)
