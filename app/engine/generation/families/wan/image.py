"""Wan image to video: Wan 2.2 TI2V 5B (text, or text and an image) and Wan 2.1 I2V.

Mirrors `WanImageToVideoPipeline.__call__` (diffusers 0.42), call for call, on top of the
text-to-video loop (`model.py`: the prompt, CFG, the schedulers, the experts, decoding):
- the input image: `video_processor.preprocess` to the clip's size, in float32; the noise
  drawn first with the job's generator (as `prepare_latents` does), then the image's latents
  by the stock `prepare_latents` itself (the VAE's mode, normalised by its mean and std);
- Wan 2.2 TI2V (`expand_timesteps`): the first latent frame is the image's at every step
  (`(1 - mask) * condition + mask * latents`, the mask 0 on that frame) and its patches'
  timesteps are 0; after the last step the same blend, then decoding;
- Wan 2.1 I2V: the model reads the noise with the 4 mask channels and the image's latents
  beside it (`cat([latents, condition], dim=1)`), and the CLIP encoder's penultimate states
  of the image (`encode_image`) as `encoder_hidden_states_image`;
- Wan 2.1 FLF2V (a first and a last frame, `last_image`): the VAE encodes the first image,
  empty frames and the last image as one clip, the mask keeps both ends, and CLIP reads
  both images (its states of the two, as one sequence for the transformer's positions);
- Wan 2.2 TI2V without an image: `WanPipeline`'s loop (`model.py`), every frame drawn.
A checkpoint carries the image's latents (and Wan 2.1 I2V's CLIP states) beside the
prompt's, in float32 as the stock pipeline keeps them, so a resumed clip needs no encoder.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import torch
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.wan import WAN21_FLF2V, WAN21_I2V, WAN22_TI2V
from app.engine.generation.families.wan.model import WanFamily
from app.engine.generation.loop.variation import varied_noise
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.loop.inpaint import MaskedImage

IMAGE_CONDITION = "image_condition"  # the input image's latents (2.1 I2V: with the mask)
IMAGE_EMBEDS = "image_embeds"  # Wan 2.1 I2V: CLIP's penultimate hidden states


class WanImageFamily(WanFamily):
    """`WanImageToVideoPipeline`'s models: Wan 2.2 TI2V 5B, Wan 2.1 I2V (its config says)."""

    def __init__(self, pipe: Any) -> None:
        super().__init__(pipe)
        self.first_frame_only = bool(pipe.config.expand_timesteps)  # TI2V: frame 0 is the image

    def _latent_channels(self) -> int:
        """The VAE's channels (`WanImageToVideoPipeline`: the DiT of 2.1 I2V reads more)."""
        return int(self.pipe.vae.config.z_dim)

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        needs = super().checkpoint_needs(params)
        if params.init_image:
            needs = (*needs, IMAGE_CONDITION)
        if params.init_image and self._reads_clip_states():
            needs = (*needs, IMAGE_EMBEDS)
        return needs

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
        last_image: bytes | None = None,
    ) -> Schedule:
        if init_image is None and not self.first_frame_only:  # submit refuses it (video_params)
            raise InvalidParameters(f"{self.label} animates an input image; none was given")
        if init_image is None or masked is not None:
            return super().initial_latents(scheduler, params, generator, init_image, conditioning)
        image = _rgb(init_image)
        last = None if last_image is None else _rgb(last_image)
        if self._reads_clip_states():  # before the noise, as the stock `__call__` encodes it
            images = image if last is None else [image, last]
            conditioning[IMAGE_EMBEDS] = self.pipe.encode_image(images, self.device).to(
                self.transformer_dtype
            )
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=torch.float32)
        pixels = self._pixels(image, params)
        last_pixels = None if last is None else self._pixels(last, params)
        prepared = self.pipe.prepare_latents(
            pixels,
            1,
            self._latent_channels(),
            params.height,
            params.width,
            params.frames,
            torch.float32,
            self.device,
            generator,
            varied_noise(noise, params),
            last_pixels,
        )
        latents, conditioning[IMAGE_CONDITION] = prepared[0], prepared[1]
        return Schedule(scheduler.timesteps, params.steps, latents)

    def _pixels(self, image: Image.Image, params: GenerationParams) -> torch.Tensor:
        """An input image as the stock pipeline hands it to `prepare_latents`: resized to
        the clip's size by its video processor, in float32."""
        pixels: torch.Tensor = self.pipe.video_processor.preprocess(
            image, height=params.height, width=params.width
        )
        return pixels.to(self.device, dtype=torch.float32)

    def _reads_clip_states(self) -> bool:
        """Whether the transformer reads CLIP image states (Wan 2.1 I2V: `image_dim`)."""
        return self.pipe.transformer.config.image_dim is not None

    def _model_input(self, latents: torch.Tensor, conditioning: Conditioning) -> torch.Tensor:
        condition = conditioning.get(IMAGE_CONDITION)
        if condition is None:
            return latents
        if self.first_frame_only:
            mask = self._noise_mask(latents, conditioning)
            return (1 - mask) * condition + mask * latents
        return torch.cat([latents, condition], dim=1)

    def _extra_inputs(self, conditioning: Conditioning) -> dict[str, torch.Tensor]:
        states = conditioning.get(IMAGE_EMBEDS)
        if states is None:
            return {}
        return {"encoder_hidden_states_image": states.to(self.transformer_dtype)}

    def _noise_mask(self, latents: torch.Tensor, conditioning: Conditioning) -> torch.Tensor:
        """TI2V with an image: `prepare_latents`' `first_frame_mask`, 0 on the first frame
        (the image's), in float32; without one, `WanPipeline`'s ones."""
        if IMAGE_CONDITION not in conditioning:
            return super()._noise_mask(latents, conditioning)
        _, _, frames, height, width = latents.shape
        mask = torch.ones(1, 1, frames, height, width, dtype=torch.float32, device=latents.device)
        mask[:, :, 0] = 0
        return mask

    def after_step(
        self,
        scheduler: Any,
        latents: torch.Tensor,
        timesteps: torch.Tensor,
        index: int,
        conditioning: Conditioning,
    ) -> torch.Tensor:
        """TI2V with an image: after the last step, the first frame is the image's (the
        stock pipeline's blend before decoding); every other step keeps the latents."""
        last = index == len(timesteps) - 1
        if not (last and self.first_frame_only and IMAGE_CONDITION in conditioning):
            return latents
        return self._model_input(latents, conditioning)


def _rgb(png: bytes) -> Image.Image:
    """The input image as the stock pipeline is given it: a PIL image in RGB."""
    with Image.open(io.BytesIO(png)) as image:
        return image.convert("RGB")


class WanI2vFamily(WanImageFamily):
    """Wan 2.1 I2V: the image's latents and mask beside the noise, CLIP's image states."""

    name = WAN21_I2V.checkpoint_family
    label = WAN21_I2V.checkpoint_label

    @staticmethod
    def drives(pipe: Any) -> bool:
        """`family_of`'s choice among the families of `WanImageToVideoPipeline`."""
        return not pipe.config.expand_timesteps and not _reads_two_images(pipe)


def _reads_two_images(pipe: Any) -> bool:
    """Whether the pipeline's transformer reads CLIP's states of a first and a last frame
    (Wan 2.1 FLF2V's `pos_embed_seq_len`)."""
    transformer = pipe.transformer
    return transformer is not None and transformer.config.pos_embed_seq_len is not None


class WanFlf2vFamily(WanImageFamily):
    """Wan 2.1 FLF2V: Wan 2.1 I2V between a first and a last frame (submit asks for both)."""

    name = WAN21_FLF2V.checkpoint_family
    label = WAN21_FLF2V.checkpoint_label

    @staticmethod
    def drives(pipe: Any) -> bool:
        return not pipe.config.expand_timesteps and _reads_two_images(pipe)


class WanTi2vFamily(WanImageFamily):
    """Wan 2.2 TI2V 5B: text alone, or an image as the first latent frame."""

    name = WAN22_TI2V.checkpoint_family
    label = WAN22_TI2V.checkpoint_label

    @staticmethod
    def drives(pipe: Any) -> bool:
        return bool(pipe.config.expand_timesteps)
