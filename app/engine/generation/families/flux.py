"""Flux.1 (dev and schnell): CLIP's pooled output and T5's sequence, a transformer on 2x2
patches of 16-channel latents, flow matching with a resolution-dependent shift, and (dev)
distilled guidance as a model input instead of classifier-free guidance.

Mirrors `FluxPipeline.__call__` (diffusers 0.42): the same calls, in the same order, with
the same arithmetic. One difference of form, none of numbers: the loop keeps the latents
unpacked, (1, 16, h/8, w/8) as the VAE makes them, and `predict` packs them for the
transformer and unpacks its output. Packing is a permutation and the scheduler's step is
element by element, so each step computes exactly the stock pipeline's values; the
checkpoint, previews and decoding see ordinary latents.

What `GenerationParams` means here (see `flow_params`): `cfg` is the distilled guidance
(dev; schnell has no guidance embedder and ignores it), one transformer call per step; no
true CFG, so no negative prompt; the sampler is "Euler", the flow-matching Euler the
folders ship. The prompt goes to both encoders as written (without its `<lora:...>` tags),
as the stock pipeline takes it: T5 reads 512 tokens, so nothing is chunked the A1111 way,
and A1111's `(word:1.2)` weights and BREAK are not interpreted (they reach T5 as text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from diffusers.pipelines.flux.pipeline_flux import calculate_shift, retrieve_timesteps
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import flow_scheduler
from app.engine.generation.flow_params import FLOW_SIZE_MULTIPLE
from app.engine.generation.lora import prompt_text
from app.engine.generation.variation import varied_noise
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.control import ControlGuide
    from app.engine.generation.inpaint import MaskedImage

PROMPT_EMBEDS = "prompt_embeds"  # T5's sequence
POOLED_EMBEDS = "pooled_embeds"  # CLIP's pooled output
TEXT_IDS = "text_ids"  # the text tokens' positions (zeros), for the rotary embedding
LATENT_IMAGE_IDS = "latent_image_ids"  # each patch's (0, row, column)
MAX_SEQUENCE_LENGTH = 512  # the stock pipeline's default: T5 tokens read


class FluxFamily:
    """`FluxPipeline`'s models (dev-style with a guidance embedder, schnell-style without)."""

    name = "flux"
    label = "Flux.1"
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS, POOLED_EMBEDS, TEXT_IDS, LATENT_IMAGE_IDS)

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

    def native_size(self) -> int:
        return int(self.pipe.default_sample_size) * int(self.pipe.vae_scale_factor)  # 1024

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        if params.width % FLOW_SIZE_MULTIPLE or params.height % FLOW_SIZE_MULTIPLE:
            raise InvalidParameters(
                f"{self.label} draws sizes in multiples of {FLOW_SIZE_MULTIPLE} pixels, "
                f"not {params.width}x{params.height}"
            )
        # As `prepare_latents`: 2 * (side // (vae_scale_factor * 2)), before packing.
        factor = self.pipe.vae_scale_factor * 2
        channels = self.pipe.transformer.config.in_channels // 4
        return (1, channels, 2 * (params.height // factor), 2 * (params.width // factor))

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        return self.checkpoint_tensors

    def scheduler(self, params: GenerationParams) -> Any:
        """The stock pipeline's step 5: sigmas 1 .. 1/steps, shifted by mu (dev's dynamic
        shift, from the number of image patches); then `set_begin_index(0)` as before its
        loop."""
        scheduler = flow_scheduler(self.pipe, params.scheduler, self.label)
        steps = params.steps
        sigmas: Any = np.linspace(1.0, 1 / steps, steps)
        if getattr(scheduler.config, "use_flow_sigmas", False):
            sigmas = None
        _, _, height, width = self.latent_shape(params)
        image_seq_len = (height // 2) * (width // 2)
        config = scheduler.config
        mu = calculate_shift(
            image_seq_len,
            config.get("base_image_seq_len", 256),
            config.get("max_image_seq_len", 4096),
            config.get("base_shift", 0.5),
            config.get("max_shift", 1.15),
        )
        retrieve_timesteps(scheduler, steps, self.device, sigmas=sigmas, mu=mu)
        scheduler.set_begin_index(0)
        return scheduler

    def uses_cfg(self, params: GenerationParams) -> bool:
        return False  # distilled guidance is a model input; no true CFG (see flow_params)

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        pipe = self.pipe
        prompt_embeds, pooled, text_ids = pipe.encode_prompt(
            prompt=prompt_text(params.prompt),  # without its <lora:...> tags
            prompt_2=None,
            device=self.device,
            num_images_per_prompt=1,
            max_sequence_length=MAX_SEQUENCE_LENGTH,
            lora_scale=None,
        )
        _, _, height, width = self.latent_shape(params)
        image_ids = pipe._prepare_latent_image_ids(
            1, height // 2, width // 2, self.device, prompt_embeds.dtype
        )
        return {
            PROMPT_EMBEDS: prompt_embeds,
            POOLED_EMBEDS: pooled,
            TEXT_IDS: text_ids,
            LATENT_IMAGE_IDS: image_ids,
        }

    def encode_references(self, images: Sequence[bytes], do_cfg: bool) -> Conditioning:
        if images:
            raise InvalidParameters(f"IP-Adapter reference images do not work with {self.label}")
        return {}

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
    ) -> Schedule:
        if masked is not None or init_image is not None:
            raise InvalidParameters(f"image-to-image and inpaint do not work with {self.label} yet")
        dtype = conditioning[PROMPT_EMBEDS].dtype
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=dtype)
        noise = varied_noise(noise, params)  # A1111's variation seed, if any
        return Schedule(scheduler.timesteps, len(scheduler.timesteps), noise)

    def resumed_schedule(self, scheduler: Any, params: GenerationParams) -> tuple[Any, int]:
        return scheduler.timesteps, len(scheduler.timesteps)

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
        pipe = self.pipe
        batch, channels, height, width = latents.shape
        packed = pipe._pack_latents(latents, batch, channels, height, width)
        timestep = t.expand(packed.shape[0]).to(packed.dtype)
        embedded_guidance = None
        if pipe.transformer.config.guidance_embeds:
            embedded_guidance = torch.full([1], guidance, device=self.device, dtype=torch.float32)
            embedded_guidance = embedded_guidance.expand(packed.shape[0])
        with pipe.transformer.cache_context("cond"):
            noise_pred: torch.Tensor = pipe.transformer(
                hidden_states=packed,
                timestep=timestep / 1000,
                guidance=embedded_guidance,
                pooled_projections=conditioning[POOLED_EMBEDS],
                encoder_hidden_states=conditioning[PROMPT_EMBEDS],
                txt_ids=conditioning[TEXT_IDS],
                img_ids=conditioning[LATENT_IMAGE_IDS],
                joint_attention_kwargs={},
                return_dict=False,
            )[0]
        return _unpacked(noise_pred, height, width)

    def after_step(
        self,
        scheduler: Any,
        latents: torch.Tensor,
        timesteps: torch.Tensor,
        index: int,
        conditioning: Conditioning,
    ) -> torch.Tensor:
        return latents

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image:
        pipe = self.pipe
        config = pipe.vae.config
        latents = (latents / config.scaling_factor) + config.shift_factor
        image = pipe.vae.decode(latents, return_dict=False)[0]
        pil: Image.Image = pipe.image_processor.postprocess(image, output_type="pil")[0]
        return pil

    def finish(self, image: Image.Image, masked: MaskedImage | None) -> Image.Image:
        return image


def _unpacked(packed: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """`FluxPipeline._unpack_latents` for latents `height` x `width` (not pixels)."""
    batch, _, channels = packed.shape
    latents = packed.view(batch, height // 2, width // 2, channels // 4, 2, 2)
    latents = latents.permute(0, 3, 1, 4, 2, 5)
    return latents.reshape(batch, channels // 4, height, width)
