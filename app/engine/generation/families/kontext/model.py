"""Flux.1 Kontext: Flux.1 dev (CLIP's pooled output, T5's sequence, distilled guidance as a
model input, packed latents, the resolution-dependent shift) whose transformer also reads
the input image's latents, as tokens after its own with the first position id 1, and
whose output for those tokens is dropped.

Mirrors `FluxKontextPipeline.__call__` (diffusers 0.42) with its defaults: the input image
is resized to the preferred Kontext resolution (`PREFERRED_KONTEXT_RESOLUTIONS`, about
1 megapixel) nearest its aspect ratio (`_auto_resize`), preprocessed and encoded to the
mode of the VAE's distribution (nothing random), before the noise is drawn. Easel's job
size is the output size; the stock pipeline is called with it as `height` and `width` and
`max_area` their product (which keeps it: at 1024x1024 these are its defaults), and a
larger one is refused at submit (`Requests.max_area`). The input image's latents and
position ids are in the conditioning, so a checkpoint carries them and a resumed job reads
exactly the image it started from.

As `FluxFamily` (whose latents, schedule, encode and decode it shares) the loop keeps the
latents unpacked and `predict` packs them. What `GenerationParams` means: the prompt is the
instruction; `cfg` the distilled guidance (the stock default 3.5); no true CFG (the stock
`true_cfg_scale` 1), so no negative prompt; an edit's init image is the input image; a job
without one is Flux text to image, as the stock pipeline given no image.

An inpaint (the instruction limited to a mask) mirrors `FluxKontextInpaintPipeline` with its
defaults (strength 1, no reference image): the picture is the input image, drawn at the
preferred resolution nearest its shape, which must be the job's size (refused at submit
otherwise, as is "only masked", which the stock pipeline's crop cannot do at that size);
the unmasked area is put back after every step as `FluxInpaintPipeline` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from diffusers.pipelines.flux import pipeline_flux_kontext, pipeline_flux_kontext_inpaint
from diffusers.pipelines.flux.pipeline_flux_kontext import retrieve_latents
from diffusers.utils.torch_utils import randn_tensor

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import trim_schedule
from app.engine.generation.families.flux.model import (
    LATENT_IMAGE_IDS,
    PROMPT_EMBEDS,
    FluxFamily,
)
from app.engine.generation.families.kontext import FLUX1_KONTEXT, KONTEXT_IMG2IMG_REFUSAL
from app.engine.generation.loop import inpaint, vae_precision
from app.engine.jobs.init_image import open_rgb
from app.engine.jobs.params import KIND_EDIT, GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from PIL import Image

    from app.engine.generation.loop.inpaint import MaskedImage

INPUT_LATENTS = "input_image_latents"  # the input image's latents, packed: the extra tokens


class KontextFamily(FluxFamily):
    """`FluxKontextPipeline`'s models."""

    name = FLUX1_KONTEXT.checkpoint_family  # as declared: what its checkpoints say
    label = FLUX1_KONTEXT.checkpoint_label

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        if params.is_inpaint:
            blend = (inpaint.MASK, inpaint.IMAGE_LATENTS, inpaint.NOISE)
            return (*self.checkpoint_tensors, INPUT_LATENTS, *blend)
        if params.kind == KIND_EDIT:
            return (*self.checkpoint_tensors, INPUT_LATENTS)
        return self.checkpoint_tensors

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
    ) -> Schedule:
        if masked is not None:
            return self._inpaint_start(scheduler, params, generator, masked, conditioning)
        if init_image is not None and params.kind != KIND_EDIT:
            raise InvalidParameters(KONTEXT_IMG2IMG_REFUSAL)  # submit refuses it first
        if init_image is not None:
            self._read_input_image(open_rgb(init_image), conditioning)
        dtype = conditioning[PROMPT_EMBEDS].dtype
        noise = randn_tensor(
            self.latent_shape(params), generator=generator, device=self.device, dtype=dtype
        )
        return Schedule(scheduler.timesteps, len(scheduler.timesteps), noise)

    def resumed_schedule(self, scheduler: Any, params: GenerationParams) -> tuple[Any, int]:
        if params.is_inpaint:
            return trim_schedule(scheduler, params)  # as the stock inpaint pipeline trims it
        return scheduler.timesteps, len(scheduler.timesteps)  # an edit: never trimmed

    def _read_input_image(self, image: Image.Image, conditioning: Conditioning) -> None:
        """The stock pipeline's image steps: resized to the preferred resolution nearest its
        aspect ratio, preprocessed, encoded (the mode: nothing random is drawn) and packed;
        its position ids (first 1) appended to the latents' own."""
        processor = self.pipe.image_processor
        multiple_of = self.pipe.vae_scale_factor * 2
        height, width = processor.get_default_height_width(image)
        # The stock pipeline's table, read where it reads it (a test shrinks both at once).
        preferred = pipeline_flux_kontext.PREFERRED_KONTEXT_RESOLUTIONS
        width, height = _nearest(preferred, width / height)
        width, height = width // multiple_of * multiple_of, height // multiple_of * multiple_of
        pixels = processor.preprocess(processor.resize(image, height, width), height, width)
        dtype = conditioning[PROMPT_EMBEDS].dtype
        latents = self._encoded_mode(pixels.to(device=self.device, dtype=dtype))
        self._add_input_tokens(latents, conditioning)

    def _inpaint_start(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        masked: MaskedImage,
        conditioning: Conditioning,
    ) -> Schedule:
        """`FluxKontextInpaintPipeline` with its defaults (no reference image, strength 1 or
        the job's): the picture at its preferred resolution (the job's size: submit checks
        it), encoded to its mode and read as the input image's tokens; the schedule trimmed
        by the strength; the noise drawn and the latents noised from the picture's; the
        mask at latent size kept with the picture's latents and the noise, so that
        `after_step` puts the unmasked area back as its loop does. The stock pipeline also
        encodes the masked picture, which it never reads and after which nothing random
        is drawn: leaving it out changes no pixel."""
        self._check_inpaint(params, masked)
        dtype = conditioning[PROMPT_EMBEDS].dtype
        timesteps, steps = trim_schedule(scheduler, params)
        processor = self.pipe.image_processor
        size = (params.height, params.width)
        pixels = processor.preprocess(processor.resize(masked.image, *size), *size)
        pixels = pixels.to(dtype=torch.float32).to(device=self.device, dtype=dtype)
        image_latents = torch.cat([self._encoded_mode(pixels)], dim=0)
        noise = randn_tensor(
            self.latent_shape(params), generator=generator, device=self.device, dtype=dtype
        )
        latents = scheduler.scale_noise(image_latents, timesteps[:1].repeat(1), noise)
        self._add_input_tokens(image_latents, conditioning)
        mask_condition = self._mask_processor().preprocess(
            masked.mask, height=params.height, width=params.width
        )
        _, channels, height, width = latents.shape
        mask = torch.nn.functional.interpolate(mask_condition, size=(height, width))
        conditioning[inpaint.MASK] = mask.to(device=self.device, dtype=dtype).repeat(
            1, channels, 1, 1
        )
        conditioning[inpaint.IMAGE_LATENTS] = image_latents
        conditioning[inpaint.NOISE] = noise
        return Schedule(timesteps, steps, latents)

    def _check_inpaint(self, params: GenerationParams, masked: MaskedImage) -> None:
        """What submit refuses first (`flow_params.inpaint_size_problems`): "only masked",
        and a size the stock pipeline would not draw the picture at."""
        if masked.crop is not None:
            raise InvalidParameters(
                f'{self.label} inpaints the whole picture; turn "only masked" off'
            )
        preferred = pipeline_flux_kontext_inpaint.PREFERRED_KONTEXT_RESOLUTIONS
        multiple_of = self.pipe.vae_scale_factor * 2
        width, height = _nearest(preferred, params.width / params.height)
        nearest = (width // multiple_of * multiple_of, height // multiple_of * multiple_of)
        if nearest != (params.width, params.height):
            raise InvalidParameters(
                f"{self.label} inpaints at its preferred sizes, not {params.width}x{params.height}"
            )

    def _encoded_mode(self, pixels: torch.Tensor) -> torch.Tensor:
        """The Kontext pipelines' image encode: the mode of the VAE's distribution (nothing
        random drawn), normalised; as every Flux pipeline, the VAE never upcast."""
        vae = self.pipe.vae

        def mode(image: torch.Tensor) -> torch.Tensor:
            encoded: torch.Tensor = retrieve_latents(vae.encode(image), sample_mode="argmax")
            return encoded

        return vae_precision.normalised(
            vae.config, vae_precision.run_encoder(vae, pixels, False, mode)
        )

    def _add_input_tokens(self, latents: torch.Tensor, conditioning: Conditioning) -> None:
        """An input image's latents, packed, as the tokens after the latents' own, and their
        position ids (first 1: the stock pipelines' mark) after the latents' ids."""
        dtype = conditioning[PROMPT_EMBEDS].dtype
        _, channels, latent_height, latent_width = latents.shape
        packed = self.pipe._pack_latents(latents, 1, channels, latent_height, latent_width)
        ids = self.pipe._prepare_latent_image_ids(
            1, latent_height // 2, latent_width // 2, self.device, dtype
        )
        ids[..., 0] = 1  # the stock pipeline's mark of the input image's tokens
        conditioning[INPUT_LATENTS] = packed
        conditioning[LATENT_IMAGE_IDS] = torch.cat([conditioning[LATENT_IMAGE_IDS], ids], dim=0)

    def _transformer_input(self, packed: torch.Tensor, conditioning: Conditioning) -> torch.Tensor:
        """The latents' tokens, then the input image's (the stock pipeline's order); the
        output's first tokens are the latents' (`FluxFamily.predict` keeps those)."""
        if INPUT_LATENTS in conditioning:
            return torch.cat([packed, conditioning[INPUT_LATENTS]], dim=1)
        return packed


def _nearest(preferred: Any, aspect_ratio: float) -> tuple[int, int]:
    """The (width, height) of `preferred` nearest `aspect_ratio`, as the stock pipelines
    choose it (the first of equals)."""
    _, width, height = min((abs(aspect_ratio - w / h), w, h) for w, h in preferred)
    return width, height
