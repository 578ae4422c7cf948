"""img2img in our own loop: start part-way down the schedule from the noised init image.

Mirrors `StableDiffusionImg2ImgPipeline`: `get_timesteps` skips the first
`steps * (1 - strength)` steps, `prepare_latents` encodes the image with the VAE (sampling
its latent distribution with the job's generator; SDXL's VAE in float32, see
`vae_precision`) and adds noise at the first remaining
timestep. Same order of random draws, same arithmetic: the same image as the stock
pipeline. The rest of the loop (steps, checkpoints, pause/resume) is unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers.utils.torch_utils import randn_tensor

from app.engine.jobs.init_image import fit_to, open_rgb
from app.engine.jobs.params import GenerationParams


def trim_schedule(scheduler: Any, params: GenerationParams) -> tuple[torch.Tensor, int]:
    """The timesteps left after skipping what `strength` keeps of the image, and their steps.

    Also tells the scheduler where it begins (its sigma index), as `get_timesteps` does.
    """
    t_start = max(params.steps - params.denoising_steps, 0)
    timesteps = scheduler.timesteps[t_start * scheduler.order :]
    if hasattr(scheduler, "set_begin_index"):
        scheduler.set_begin_index(t_start * scheduler.order)
    return timesteps, params.steps - t_start


@torch.no_grad()
def start_latents(
    family: Any,
    scheduler: Any,
    params: GenerationParams,
    init_png: bytes,
    generator: torch.Generator,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, int, torch.Tensor]:
    """(timesteps, steps, latents) to start the loop from `init_png`, resized to the job;
    the image encoded by `family.encode_image` (in float32 where the stock pipeline upcasts
    the VAE: SDXL's)."""
    timesteps, steps = trim_schedule(scheduler, params)
    device = family.device
    image = fit_to(open_rgb(init_png), (params.width, params.height))
    pixels = family.pipe.image_processor.preprocess(image).to(device=device, dtype=dtype)
    image_latents = family.encode_image(pixels, generator)
    noise = randn_tensor(image_latents.shape, generator=generator, device=device, dtype=dtype)
    latents = scheduler.add_noise(image_latents, noise, timesteps[:1])
    return timesteps, steps, latents
