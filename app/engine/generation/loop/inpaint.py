"""Inpaint in our own loop: a mask says what to repaint, the rest of the image is kept.

Mirrors `StableDiffusionInpaintPipeline` and `StableDiffusionXLInpaintPipeline` call for
call: the mask is binarised by the pipelines' mask processor, the image latents and the
masked image's latents are drawn from the job's generator in the pipelines' order, and
- an ordinary (4-channel) UNet: after every step the unmasked area is replaced by the image
  latents noised to the next timestep (latent blending);
- an inpainting (9-channel) UNet: the mask and the masked image's latents are concatenated
  to the model's input at every step.
"Only masked" is the pipelines' `padding_mask_crop`: the mask's box plus padding, widened
to the job's aspect ratio, is generated at the job's size and pasted back through the
(blurred) mask. Mask blur is what their users do first: `mask_processor.blur(mask, r)`.

Everything a step needs (mask, image latents, the noise, masked image latents) lives in the
job's conditioning, so a checkpoint carries it and a resumed job blends with exactly it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from diffusers.image_processor import VaeImageProcessor
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.loop import img2img
from app.engine.jobs.init_image import fit_to, open_rgb
from app.engine.jobs.mask import open_mask
from app.engine.jobs.params import GenerationParams, InvalidParameters

MASK = "inpaint_mask"  # the binarised mask at latent size; [mask, mask] when CFG is on
MASKED_IMAGE = "inpaint_masked_image_latents"  # the image with the mask's area blanked
IMAGE_LATENTS = "inpaint_image_latents"  # 4-channel UNets: what the kept area becomes
NOISE = "inpaint_noise"  # 4-channel UNets: the noise the kept area is noised with

Conditioning = dict[str, torch.Tensor]  # as `families.base` (not imported: it imports us)

INPAINT_CHANNELS = 9  # latents (4) + mask (1) + masked image latents (4)


@dataclass(frozen=True)
class MaskedImage:
    """A job's image and mask as the stock pipeline is handed them, and the crop."""

    image: Image.Image  # RGB; the whole picture (only masked: at its own size)
    mask: Image.Image  # "L", white = repaint, already blurred
    crop: tuple[int, int, int, int] | None  # only masked: the box generated, else None


def masked_image(params: GenerationParams, init_png: bytes, mask_png: bytes) -> MaskedImage:
    image = open_rgb(init_png)
    mask = open_mask(mask_png)
    if not params.only_masked:
        size = (params.width, params.height)
        image, mask = fit_to(image, size), fit_to(mask, size)
    elif mask.size != image.size:
        raise InvalidParameters(
            f"the mask is {mask.width}x{mask.height} but the image {image.width}x{image.height}"
        )
    if params.mask_blur:
        mask = VaeImageProcessor.blur(mask, params.mask_blur)
    crop = None
    if params.only_masked:
        crop = VaeImageProcessor.get_crop_region(
            mask, params.width, params.height, pad=params.mask_padding
        )
    return MaskedImage(image, mask, crop)


def checkpoint_tensors(in_channels: int) -> tuple[str, ...]:
    """What an inpaint checkpoint's conditioning carries besides the prompt's."""
    if in_channels == INPAINT_CHANNELS:
        return (MASK, MASKED_IMAGE)
    return (MASK, MASKED_IMAGE, IMAGE_LATENTS, NOISE)


@torch.no_grad()
def start_latents(
    family: Any,
    scheduler: Any,
    params: GenerationParams,
    masked: MaskedImage,
    generator: torch.Generator,
    conditioning: Conditioning,
    do_cfg: bool,
) -> tuple[torch.Tensor, int, torch.Tensor]:
    """(timesteps, steps, latents) to start from, as the inpaint pipelines' steps 4 to 7;
    adds the tensors the steps need to `conditioning`."""
    pipe = family.pipe
    device, dtype = family.device, conditioning["prompt_embeds"].dtype
    in_channels = pipe.unet.config.in_channels
    if in_channels not in (4, INPAINT_CHANNELS):
        raise InvalidParameters(f"cannot inpaint with a UNet of {in_channels} input channels")
    timesteps, steps = img2img.trim_schedule(scheduler, params)
    strength_max = params.strength == 1.0
    height, width = params.height, params.width
    resize_mode = "fill" if masked.crop is not None else "default"
    init = pipe.image_processor.preprocess(
        masked.image, height=height, width=width, crops_coords=masked.crop, resize_mode=resize_mode
    ).to(dtype=torch.float32)
    # prepare_latents
    shape = family.latent_shape(params)
    image_latents = None
    if in_channels == 4 or not strength_max:
        image_latents = family.encode_image(init.to(device=device, dtype=dtype), generator)
        # As the pipelines' batch repeat: a contiguous copy (the VAE's output is not, and
        # the UNet's convolutions round differently on other strides).
        image_latents = image_latents.repeat(1, 1, 1, 1)
    noise = randn_tensor(shape, generator=generator, device=device, dtype=dtype)
    if strength_max:
        latents = noise * scheduler.init_noise_sigma
    else:
        latents = scheduler.add_noise(image_latents, noise, timesteps[:1].repeat(1))
    # prepare_mask_latents
    mask_condition = mask_processor(pipe).preprocess(
        masked.mask, height=height, width=width, resize_mode=resize_mode, crops_coords=masked.crop
    )
    blanked = init * (mask_condition < 0.5)
    factor = pipe.vae_scale_factor
    mask = torch.nn.functional.interpolate(mask_condition, size=(height // factor, width // factor))
    mask = mask.to(device=device, dtype=dtype)
    blanked_latents = family.encode_image(blanked.to(device=device, dtype=dtype), generator)
    conditioning[MASK] = torch.cat([mask] * 2) if do_cfg else mask
    blanked_latents = torch.cat([blanked_latents] * 2) if do_cfg else blanked_latents
    conditioning[MASKED_IMAGE] = blanked_latents.to(device=device, dtype=dtype)
    if in_channels == 4:
        assert image_latents is not None
        conditioning[IMAGE_LATENTS] = image_latents
        conditioning[NOISE] = noise
    return timesteps, steps, latents


def model_input(model_input: torch.Tensor, conditioning: Conditioning) -> torch.Tensor:
    """An inpainting UNet's input: the (scaled) latents, the mask, the masked image."""
    return torch.cat([model_input, conditioning[MASK], conditioning[MASKED_IMAGE]], dim=1)


def blend(
    scheduler: Any,
    latents: torch.Tensor,
    timesteps: torch.Tensor,
    index: int,
    conditioning: Conditioning,
) -> torch.Tensor:
    """A 4-channel UNet's step `index` done: the kept area back to the image, noised to the
    next timestep (none after the last)."""
    proper = conditioning[IMAGE_LATENTS]
    init_mask = conditioning[MASK][:1]  # the pipelines' `mask.chunk(2)[0]` under CFG
    if index < len(timesteps) - 1:
        noise_timestep = timesteps[index + 1]
        proper = scheduler.add_noise(proper, conditioning[NOISE], torch.tensor([noise_timestep]))
    return (1 - init_mask) * proper + init_mask * latents


def paste_back(pipe: Any, image: Image.Image, masked: MaskedImage) -> Image.Image:
    """Only masked: the generated box pasted into the whole picture through the mask."""
    if masked.crop is None:
        return image
    pasted: Image.Image = pipe.image_processor.apply_overlay(
        masked.mask, masked.image, image, masked.crop
    )
    return pasted


def mask_processor(pipe: Any, patch: int = 1) -> VaeImageProcessor:
    """The inpaint pipelines' `mask_processor` (the text-to-image pipeline has none).
    `patch`: the side of the transformer's latent patches (Z-Image's 2), by which its
    inpaint pipeline multiplies the VAE's scale factor."""
    existing = getattr(pipe, "mask_processor", None)
    if existing is not None:
        return existing
    return VaeImageProcessor(
        vae_scale_factor=pipe.vae_scale_factor * patch,
        do_normalize=False,
        do_binarize=True,
        do_convert_grayscale=True,
    )
