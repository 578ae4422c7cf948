"""What the UNet families (SD 1.x/2.x and SDXL) share: latents, scheduler, one step, img2img.

Mirrors the shared parts of `StableDiffusionPipeline.__call__` and
`StableDiffusionXLPipeline.__call__`; each family adds its prompt encoding, extra UNet
conditioning and decoding.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.families.base import Conditioning, Schedule, stock_step
from app.engine.generation.guidance import reference
from app.engine.generation.loop import img2img, inpaint, vae_precision
from app.engine.generation.loop.schedulers import make_scheduler
from app.engine.generation.loop.variation import varied_noise
from app.engine.generation.prompts.weights import ClipEncoders
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide

PROMPT_EMBEDS = "prompt_embeds"  # [uncond, cond] when CFG is on
TIMESTEP_COND = "timestep_cond"  # guidance-distilled UNets only (time_cond_proj_dim)
# Text-encoder outputs kept per pipeline, for jobs that repeat a prompt (a seed batch, a
# grid, re-runs): the very tensors, reused. `forget_prompts` empties it when the LoRAs
# applied change (they change the text encoders).
PROMPTS_KEPT = 16
_PROMPTS_ATTRIBUTE = "_easel_prompts"


class UNetFamily(ABC):
    """The common part; a family is a subclass with its encoder(s) and decoder."""

    name = ""
    label = ""
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS,)
    # Whether the stock pipelines run the VAE in float32 when its config says
    # `force_upcast` (SDXL's do; SD 1.x/2.x's never do, see `vae_precision`).
    follows_force_upcast = False

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe

    @property
    def device(self) -> torch.device:
        return self.pipe._execution_device

    @property
    def dtype(self) -> torch.dtype:
        return self.pipe.unet.dtype

    def native_size(self) -> int:
        return int(self.pipe.unet.config.sample_size) * int(self.pipe.vae_scale_factor)

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        factor = self.pipe.vae_scale_factor
        channels = self.pipe.vae.config.latent_channels  # an inpainting UNet takes 9, not 4
        return (1, channels, params.height // factor, params.width // factor)

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        needs = self.checkpoint_tensors
        references = len(params.references)
        needs = (*needs, *(reference.embeds_key(index) for index in range(references)))
        if not params.is_inpaint:
            return needs
        in_channels = self.pipe.unet.config.in_channels
        return (*needs, *inpaint.checkpoint_tensors(in_channels))

    def encode_references(
        self, images: Sequence[bytes], do_cfg: bool, conditioning: Conditioning
    ) -> Conditioning:
        return reference.image_embeds(self.pipe, images, do_cfg)

    def encode_edit(
        self, params: GenerationParams, images: Sequence[bytes], do_cfg: bool
    ) -> Conditioning:
        """No UNet family edits from an instruction: submit refuses an edit first."""
        raise InvalidParameters(f"{self.label} models cannot edit from an instruction")

    def scheduler(self, params: GenerationParams) -> Any:
        scheduler = make_scheduler(self.pipe, params.scheduler, params.scheduler_config)
        scheduler.set_timesteps(params.steps, device=self.pipe._execution_device)
        return scheduler

    def uses_cfg(self, params: GenerationParams) -> bool:
        # As the stock pipeline: guidance-distilled UNets (time_cond_proj_dim) take CFG as input.
        return params.cfg > 1 and self.pipe.unet.config.time_cond_proj_dim is None

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        conditioning = self._encoded_prompt(params, do_cfg)
        timestep_cond = self._timestep_cond(params, conditioning[PROMPT_EMBEDS].dtype)
        if timestep_cond is not None:
            conditioning[TIMESTEP_COND] = timestep_cond
        return conditioning

    def _encoded_prompt(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        """`encode_prompt`, or what it gave for the same prompt on this pipeline before."""
        kept: OrderedDict[tuple[Any, ...], Conditioning] | None = getattr(
            self.pipe, _PROMPTS_ATTRIBUTE, None
        )
        if kept is None:
            kept = OrderedDict()
            setattr(self.pipe, _PROMPTS_ATTRIBUTE, kept)
        key = (
            params.prompt, params.negative_prompt, params.width, params.height, do_cfg,
            str(self.device), self.pipe.text_encoder.dtype,
        )  # fmt: skip
        found = kept.get(key)
        if found is None:
            found = kept[key] = self.encode_prompt(params, do_cfg)
            while len(kept) > PROMPTS_KEPT:
                kept.popitem(last=False)
        else:
            kept.move_to_end(key)
        return dict(found)  # the same tensors, in a dict of the caller's own

    @abstractmethod
    def encode_prompt(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        """The prompt's embeddings (and the family's other text conditioning)."""

    @abstractmethod
    def clip_encoders(self) -> ClipEncoders:
        """The text encoders, for prompts in A1111's syntax (`prompts.weights`)."""

    @abstractmethod
    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image: ...

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: inpaint.MaskedImage | None = None,
    ) -> Schedule:
        dtype = conditioning[PROMPT_EMBEDS].dtype
        if self.pipe.unet.config.in_channels == inpaint.INPAINT_CHANNELS and masked is None:
            raise InvalidParameters("an inpainting model needs an image and a mask to repaint")
        if masked is not None:
            timesteps, steps, latents = inpaint.start_latents(
                self, scheduler, params, masked, generator, conditioning, self.uses_cfg(params)
            )
            return Schedule(timesteps, steps, latents)
        if init_image is not None:
            timesteps, steps, latents = img2img.start_latents(
                self, scheduler, params, init_image, generator, dtype
            )
            return Schedule(timesteps, steps, latents)
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=dtype)
        noise = varied_noise(noise, params)  # A1111's variation seed, if any
        return Schedule(scheduler.timesteps, params.steps, noise * scheduler.init_noise_sigma)

    def resumed_schedule(self, scheduler: Any, params: GenerationParams) -> tuple[Any, int]:
        if params.init_image:
            return img2img.trim_schedule(scheduler, params)
        return scheduler.timesteps, params.steps

    def predict(
        self,
        scheduler: Any,
        latents: torch.Tensor,
        t: torch.Tensor,
        conditioning: Conditioning,
        guidance: float,
        do_cfg: bool,
        control: ControlGuide | None = None,
        index: int = 0,
    ) -> torch.Tensor:
        model_input = torch.cat([latents] * 2) if do_cfg else latents
        if hasattr(scheduler, "scale_model_input"):
            model_input = scheduler.scale_model_input(model_input, t)
        added = self.added_conditioning(conditioning)
        down, mid = None, None
        if control is not None:  # on the latents alone, as the ControlNet inpaint pipelines
            down, mid = control.residuals(
                index, latents, model_input, t, scheduler, conditioning[PROMPT_EMBEDS], added,
                do_cfg,
            )  # fmt: skip
        if self.pipe.unet.config.in_channels == inpaint.INPAINT_CHANNELS:
            model_input = inpaint.model_input(model_input, conditioning)
        noise_pred: torch.Tensor = self.pipe.unet(
            model_input,
            t,
            encoder_hidden_states=conditioning[PROMPT_EMBEDS],
            timestep_cond=conditioning.get(TIMESTEP_COND),
            cross_attention_kwargs=None,
            down_block_additional_residuals=down,
            mid_block_additional_residual=mid,
            added_cond_kwargs=reference.with_image_embeds(added, conditioning),
            return_dict=False,
        )[0]
        if do_cfg:
            uncond, cond = noise_pred.chunk(2)
            noise_pred = uncond + guidance * (cond - uncond)
        return noise_pred

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
        if inpaint.IMAGE_LATENTS not in conditioning:
            return latents  # not an inpaint, or an inpainting UNet (it sees the mask)
        return inpaint.blend(scheduler, latents, timesteps, index, conditioning)

    def encode_image(self, pixels: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """`pixels` as latents (sampled with `generator`): the img2img pipelines'
        `prepare_latents` and the inpaint pipelines' `_encode_vae_image`."""
        vae = self.pipe.vae
        upcast = self.follows_force_upcast and vae_precision.encode_upcasts(vae)
        return vae_precision.encode(vae, pixels, generator, upcast=upcast)

    def decoded_pixels(
        self, latents: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """The loop's latents decoded, as the pipelines after their loop."""
        vae = self.pipe.vae
        upcast = self.follows_force_upcast and vae_precision.decode_upcasts(vae)
        return vae_precision.decode(vae, latents, upcast=upcast, generator=generator)

    def finish(self, image: Image.Image, masked: inpaint.MaskedImage | None) -> Image.Image:
        return image if masked is None else inpaint.paste_back(self.pipe, image, masked)

    def added_conditioning(self, conditioning: Conditioning) -> dict[str, torch.Tensor] | None:
        """The UNet's extra conditioning (SDXL's); none for SD 1.x/2.x."""
        return None

    def _timestep_cond(self, params: GenerationParams, dtype: torch.dtype) -> torch.Tensor | None:
        dim = self.pipe.unet.config.time_cond_proj_dim
        if dim is None:
            return None
        scale = torch.tensor(params.cfg - 1).repeat(1)
        embedding = self.pipe.get_guidance_scale_embedding(scale, embedding_dim=dim)
        return embedding.to(device=self.pipe._execution_device, dtype=dtype)


def forget_prompts(pipe: Any) -> None:
    """Drop the text-encoder outputs kept for `pipe` (its LoRAs changed)."""
    kept = getattr(pipe, _PROMPTS_ATTRIBUTE, None)
    if kept is not None:
        kept.clear()
