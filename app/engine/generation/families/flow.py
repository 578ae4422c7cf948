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

from app.engine.generation.families.base import Conditioning, stock_step
from app.engine.generation.families.flow_params import (
    FLOW_SIZE_MULTIPLE,
    edit_images_refusal,
    reference_refusal,
    sampler_problem,
)
from app.engine.generation.loop import inpaint
from app.engine.generation.prompts.loras import prompt_text
from app.engine.generation.prompts.weights import plain_text
from app.engine.jobs.params import GenerationParams, InvalidParameters, decode_scheduler_config

if TYPE_CHECKING:
    from app.engine.generation.loop.inpaint import MaskedImage

SCHEDULER_CLASSES: dict[str, type[Any]] = {"Euler": FlowMatchEulerDiscreteScheduler}


def flow_scheduler(pipe: Any, scheduler: str, label: str, config: str = "") -> Any:
    """A fresh scheduler of the sampler `scheduler` from `pipe`'s scheduler config (with
    `config`'s values over it: a job's `scheduler_config`, a few-step LoRA's shift), its
    timesteps not set yet; `InvalidParameters` for a sampler no flow model takes."""
    problem = sampler_problem(scheduler, label)
    if problem:
        raise InvalidParameters(problem)
    overrides = decode_scheduler_config(config, takes_timesteps=False)
    return SCHEDULER_CLASSES[scheduler].from_config(pipe.scheduler.config, **overrides)


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
    and without A1111's syntax if it has any (`prompts.weights.plain_text`: brackets and
    weights dropped, BREAK a space). T5 reads 512 tokens of sentences, not chunks of 75, and
    A1111's per-token weights were made for CLIP's hidden states, which Flux does not use:
    of CLIP it takes the pooled output, which A1111 also computes from the unweighted words.
    A prompt without such syntax is passed as written, as to the stock pipeline."""
    text = prompt_text(prompt)
    plain = plain_text(text)
    return text if plain == " ".join(text.split()) else plain


def packed_latent_shape(pipe: Any, label: str, params: GenerationParams) -> tuple[int, ...]:
    """The latents of a family that packs them in 2x2 patches (Flux.1, Qwen-Image), as its
    `prepare_latents` makes them before packing: 2 * (side // (vae_scale_factor * 2))."""
    if params.width % FLOW_SIZE_MULTIPLE or params.height % FLOW_SIZE_MULTIPLE:
        raise InvalidParameters(
            f"{label} draws sizes in multiples of {FLOW_SIZE_MULTIPLE} pixels, "
            f"not {params.width}x{params.height}"
        )
    factor = pipe.vae_scale_factor * 2
    channels = pipe.transformer.config.in_channels // 4
    return (1, channels, 2 * (params.height // factor), 2 * (params.width // factor))


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

    def for_transformer(self, embeds: torch.Tensor) -> torch.Tensor:
        """A text encoder's output in the transformer's dtype. Where float16 would overflow
        a text encoder, it runs wider than the transformer (`device.precision`) and the
        stock pipelines pass its output on uncast (their latents take its dtype): a stock
        user there casts the embeddings and passes them in, as this does. Otherwise a
        no-op: the encoders already run in the transformer's dtype. (Z-Image's stock loop
        keeps float32 latents and passes the embeddings as encoded: it does not use this.)"""
        return embeds.to(self.dtype)

    def encode_references(
        self, images: Sequence[bytes], do_cfg: bool, conditioning: Conditioning
    ) -> Conditioning:
        if images:  # submit refuses them (flow_params); a job stored before that lands here
            raise InvalidParameters(reference_refusal(self.label))
        return {}

    def encode_edit(
        self, params: GenerationParams, images: Sequence[bytes], do_cfg: bool
    ) -> Conditioning:
        """Nothing: an edit's one input image is the init image `initial_latents` reads."""
        if len(images) > 1:  # submit refuses them (flow_params); a job stored before lands here
            raise InvalidParameters(edit_images_refusal(self.label, 1, len(images)))
        return {}

    def resumed_schedule(self, scheduler: Any, params: GenerationParams) -> tuple[Any, int]:
        """Every timestep of the set schedule, or for an init image (img2img, inpaint) the
        part its strength leaves, as the stock img2img pipelines trim it."""
        if params.init_image:
            return trim_schedule(scheduler, params)
        return scheduler.timesteps, len(scheduler.timesteps)

    def blend_dtype(self) -> torch.dtype | None:
        """The dtype the stock inpaint loop blends in, where a checkpoint restores the
        blending tensors in another (None: as they are)."""
        return None

    def step(
        self,
        scheduler: Any,
        noise_pred: torch.Tensor,
        t: torch.Tensor,
        latents: torch.Tensor,
        generator: torch.Generator,
        conditioning: Conditioning,
    ) -> Any:
        return stock_step(scheduler, noise_pred, t, latents, generator)

    def after_step(
        self,
        scheduler: Any,
        latents: torch.Tensor,
        timesteps: torch.Tensor,
        index: int,
        conditioning: Conditioning,
    ) -> torch.Tensor:
        """Inpaint: the kept area back to the image latents, noised to the next timestep
        (none after the last), as each flow inpaint pipeline's loop does after a step with
        `scale_noise` (`FluxInpaintPipeline`, `StableDiffusion3InpaintPipeline`,
        `ZImageInpaintPipeline`, `Flux2KleinInpaintPipeline`); other jobs keep nothing.
        The mask has one channel, broadcast over the latents' (as over Flux's packed ones)."""
        if inpaint.IMAGE_LATENTS not in conditioning:
            return latents
        dtype = self.blend_dtype()

        def kept(name: str) -> torch.Tensor:
            tensor = conditioning[name]
            return tensor if dtype is None else tensor.to(dtype)

        proper = kept(inpaint.IMAGE_LATENTS)
        if index < len(timesteps) - 1:
            next_timestep = torch.tensor([timesteps[index + 1]])
            proper = scheduler.scale_noise(proper, next_timestep, kept(inpaint.NOISE))
        mask = kept(inpaint.MASK)
        blended: torch.Tensor = (1 - mask) * proper + mask * latents
        return blended

    def finish(self, image: Image.Image, masked: MaskedImage | None) -> Image.Image:
        """An inpaint's image pasted back into the picture (only masked: into its box)."""
        return image if masked is None else inpaint.paste_back(self.pipe, image, masked)
