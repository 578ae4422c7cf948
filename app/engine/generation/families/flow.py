"""What every flow-matching family (Flux.1, SD 3.x) needs: its sampler, as a scheduler.

The released folders ship a `FlowMatchEulerDiscreteScheduler`, and the stock pipelines
step with it; Easel's "Euler" (its default) is that scheduler, built from the model's own
scheduler config, so it equals the one the stock pipeline holds. The names the flow
families accept are `flow_params.FLOW_SAMPLERS` (torch-free, for the submit-time checks);
the scheduler's checkpoint state (its step index and sigmas) is declared in
`schedulers.KINDS` with the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from diffusers import FlowMatchEulerDiscreteScheduler
from PIL import Image

from app.engine.generation.families.base import Conditioning
from app.engine.generation.flow_params import sampler_problem
from app.engine.generation.lora import prompt_text
from app.engine.generation.prompt_weights import plain_text
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.inpaint import MaskedImage

SCHEDULER_CLASSES: dict[str, type[Any]] = {"Euler": FlowMatchEulerDiscreteScheduler}


def flow_scheduler(pipe: Any, scheduler: str, label: str) -> Any:
    """A fresh scheduler of the sampler `scheduler` from `pipe`'s scheduler config, its
    timesteps not set yet; `InvalidParameters` for a sampler no flow model takes."""
    problem = sampler_problem(scheduler, label)
    if problem:
        raise InvalidParameters(problem)
    return SCHEDULER_CLASSES[scheduler].from_config(pipe.scheduler.config)


def trim_schedule(scheduler: Any, params: GenerationParams) -> tuple[torch.Tensor, int]:
    """img2img's timesteps and steps, as the flow img2img pipelines' `get_timesteps`
    (`FluxImg2ImgPipeline`, `StableDiffusion3Img2ImgPipeline`): unlike the UNet pipelines
    they skip `int(steps - steps * strength)` steps (the product is not rounded down
    first), so 4 steps at strength 0.6 run 3 here, 2 on SD 1.x."""
    init_timestep = min(params.steps * params.strength, params.steps)
    t_start = int(max(params.steps - init_timestep, 0))
    timesteps = scheduler.timesteps[t_start * scheduler.order :]
    scheduler.set_begin_index(t_start * scheduler.order)
    return timesteps, params.steps - t_start


def sentence_prompt(prompt: str) -> str:
    """What a sentence-reading text encoder (T5, Qwen3; Flux's CLIP too) reads of `prompt`:
    the prompt without its `<lora:...>` tags,
    and without A1111's syntax if it has any (`prompt_weights.plain_text`: brackets and
    weights dropped, BREAK a space). T5 reads 512 tokens of sentences, not chunks of 75, and
    A1111's per-token weights were made for CLIP's hidden states, which Flux does not use:
    of CLIP it takes the pooled output, which A1111 also computes from the unweighted words.
    A prompt without such syntax is passed as written, as to the stock pipeline."""
    text = prompt_text(prompt)
    plain = plain_text(text)
    return text if plain == " ".join(text.split()) else plain


class FlowFamily:
    """What every flow-matching transformer family (Flux.1, SD 3.x, Z-Image, Flux.2 Klein)
    does alike; each subclass mirrors its own stock pipeline for the rest."""

    label: str

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe

    @property
    def device(self) -> torch.device:
        device: torch.device = self.pipe._execution_device
        return device

    @property
    def dtype(self) -> torch.dtype:
        dtype: torch.dtype = self.pipe.transformer.dtype
        return dtype

    def encode_references(self, images: Sequence[bytes], do_cfg: bool) -> Conditioning:
        if images:  # submit refuses them (flow_params); a job stored before that lands here
            raise InvalidParameters(f"IP-Adapter reference images do not work with {self.label}")
        return {}

    def after_step(
        self,
        scheduler: Any,
        latents: torch.Tensor,
        timesteps: torch.Tensor,
        index: int,
        conditioning: Conditioning,
    ) -> torch.Tensor:
        return latents  # only an inpaint keeps part of the picture (the families that can)

    def finish(self, image: Image.Image, masked: MaskedImage | None) -> Image.Image:
        return image
