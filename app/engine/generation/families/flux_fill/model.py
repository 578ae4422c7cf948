"""Flux.1 Fill: Flux.1 dev (CLIP's pooled output, T5's sequence, distilled guidance as a
model input, packed latents, the resolution-dependent shift) whose transformer reads, after
each patch's latents, the same patch of the picture with the masked area blanked (its VAE
latents) and of the mask (one channel per pixel of the patch): 64 + 64 + 256 = 384 input
channels for FLUX.1-Fill-dev, 64 output channels.

Mirrors `FluxFillPipeline.__call__` (diffusers 0.42): the picture preprocessed and encoded,
the schedule trimmed by the strength (its default 1.0: an outpaint's; every step), the
noise drawn and the latents noised to the first step, as `FluxImg2ImgPipeline` (whose
`prepare_latents` it copies, and `FluxFamily._img2img_start` mirrors); then the mask
binarised at full size, the picture blanked under it and encoded (a second draw of the
job's generator), the mask folded into 8 x 8 channels per latent pixel, both packed. Unlike
`FluxInpaintPipeline` nothing is blended after a step: the model keeps the unmasked area by
itself. The masked picture's latents and the mask are one tensor of the conditioning, so a
checkpoint carries them and a resumed job reads exactly what it started with.

As `FluxFamily` (whose schedule, encode, predict and decode it shares) the loop keeps the
latents unpacked and `predict` packs them. What `GenerationParams` means: `cfg` is the
distilled guidance (the stock default and the model card's: 30); the strength, as the stock
pipeline's; "only masked" crops the picture and mask to the mask's box as
`FluxInpaintPipeline`'s `padding_mask_crop` does, and pastes the result back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import packed_latent_shape
from app.engine.generation.families.flux.model import PROMPT_EMBEDS, FluxFamily
from app.engine.generation.families.flux_fill import FLUX1_FILL, NEEDS_MASK
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.loop.inpaint import MaskedImage

# The masked picture's latents and the mask, packed, side by side: what the transformer
# reads after the latents (FluxFillPipeline's `masked_image_latents` once the mask is joined).
FILL_CONDITION = "fill_masked_image_and_mask"


class FluxFillFamily(FluxFamily):
    """`FluxFillPipeline`'s models."""

    name = FLUX1_FILL.checkpoint_family  # as declared: what its checkpoints say
    label = FLUX1_FILL.checkpoint_label

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        """As Flux.1's, with the VAE's channels: the transformer's input is wider."""
        _, _, height, width = packed_latent_shape(self.pipe, self.label, params)
        return (1, int(self.pipe.vae.config.latent_channels), height, width)

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        return (*self.checkpoint_tensors, FILL_CONDITION)

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
    ) -> Schedule:
        if masked is None:
            raise InvalidParameters(NEEDS_MASK)  # submit refuses it first
        dtype = conditioning[PROMPT_EMBEDS].dtype
        start = self._img2img_start(scheduler, params, generator, masked.image, masked.crop, dtype)
        conditioning[FILL_CONDITION] = self._masked_condition(params, masked, generator, dtype)
        return Schedule(start.timesteps, start.total_steps, start.latents)

    def _masked_condition(
        self,
        params: GenerationParams,
        masked: MaskedImage,
        generator: torch.Generator,
        dtype: torch.dtype,
    ) -> torch.Tensor:
        """The stock pipeline's step 6 (`prepare_mask_latents`): the picture blanked where
        the mask is white, encoded and packed; the binarised mask, each latent pixel's
        8 x 8 pixels as channels, packed; the two joined."""
        pipe = self.pipe
        resize_mode = "fill" if masked.crop is not None else "default"
        size = {"height": params.height, "width": params.width}
        picture = pipe.image_processor.preprocess(
            masked.image, **size, crops_coords=masked.crop, resize_mode=resize_mode
        ).to(dtype=torch.float32)
        mask = self._mask_processor().preprocess(
            masked.mask, **size, crops_coords=masked.crop, resize_mode=resize_mode
        )
        blanked = (picture * (1 - mask)).to(device=self.device, dtype=dtype)
        latents = self._encode_vae_image(blanked, generator).to(device=self.device, dtype=dtype)
        _, channels, height, width = self.latent_shape(params)
        packed_latents = pipe._pack_latents(latents, 1, channels, height, width)
        factor = pipe.vae_scale_factor
        folded = mask[:, 0, :, :].view(1, height, factor, width, factor)
        folded = folded.permute(0, 2, 4, 1, 3).reshape(1, factor * factor, height, width)
        packed_mask = pipe._pack_latents(folded, 1, factor * factor, height, width)
        packed_mask = packed_mask.to(device=self.device, dtype=dtype)
        return torch.cat((packed_latents, packed_mask), dim=-1)

    def _transformer_input(self, packed: torch.Tensor, conditioning: Conditioning) -> torch.Tensor:
        return torch.cat((packed, conditioning[FILL_CONDITION]), dim=2)
