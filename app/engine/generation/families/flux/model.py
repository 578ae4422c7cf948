"""Flux.1 (dev and schnell): CLIP's pooled output and T5's sequence, a transformer on 2x2
patches of 16-channel latents, flow matching with a resolution-dependent shift, and (dev)
distilled guidance as a model input instead of classifier-free guidance.

Mirrors `FluxPipeline.__call__` (diffusers 0.42), and for img2img and inpaint
`FluxImg2ImgPipeline` and `FluxInpaintPipeline`: the same calls, in the same order, with
the same arithmetic. One difference of form, none of numbers: the loop keeps the latents
unpacked, (1, 16, h/8, w/8) as the VAE makes them, and `predict` packs them for the
transformer and unpacks its output. Packing is a permutation and the scheduler's step is
element by element, so each step computes exactly the stock pipeline's values; the
checkpoint, previews and decoding see ordinary latents.

What `GenerationParams` means here (see `flow_params`): `cfg` is the distilled guidance
(dev; schnell has no guidance embedder and ignores it), one transformer call per step; no
true CFG, so no negative prompt; the sampler is "Euler", the flow-matching Euler the
folders ship. The prompt goes to both encoders as the stock pipeline takes it, unchunked
(T5 reads 512 tokens); A1111's `(word:1.2)` weights and BREAK are dropped from it, not
applied (see `flow.sentence_prompt`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from diffusers.image_processor import VaeImageProcessor
from diffusers.pipelines.flux.pipeline_flux import calculate_shift, retrieve_timesteps
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import (
    FlowFamily,
    flow_scheduler,
    packed_latent_shape,
    sentence_prompt,
    trim_schedule,
)
from app.engine.generation.families.flux import FLUX1, redux
from app.engine.generation.loop import inpaint, vae_precision
from app.engine.generation.loop.variation import varied_noise
from app.engine.jobs.init_image import fit_to, open_rgb
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide
    from app.engine.generation.loop.inpaint import MaskedImage

PROMPT_EMBEDS = "prompt_embeds"  # T5's sequence
POOLED_EMBEDS = "pooled_embeds"  # CLIP's pooled output
TEXT_IDS = "text_ids"  # the text tokens' positions (zeros), for the rotary embedding
LATENT_IMAGE_IDS = "latent_image_ids"  # each patch's (0, row, column)
MAX_SEQUENCE_LENGTH = 512  # the stock pipeline's default: T5 tokens read


class FluxFamily(FlowFamily):
    """`FluxPipeline`'s models (dev-style with a guidance embedder, schnell-style without)."""

    name = FLUX1.checkpoint_family  # as declared: what its checkpoints say
    label = FLUX1.checkpoint_label
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS, POOLED_EMBEDS, TEXT_IDS, LATENT_IMAGE_IDS)

    def native_size(self) -> int:
        return int(self.pipe.default_sample_size) * int(self.pipe.vae_scale_factor)  # 1024

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        return packed_latent_shape(self.pipe, self.label, params)

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        if params.is_inpaint:
            return (*self.checkpoint_tensors, inpaint.MASK, inpaint.IMAGE_LATENTS, inpaint.NOISE)
        return self.checkpoint_tensors

    def scheduler(self, params: GenerationParams) -> Any:
        """The stock pipeline's step 5: sigmas 1 .. 1/steps, shifted by mu (dev's dynamic
        shift, from the number of image patches); then `set_begin_index(0)` as before its
        loop."""
        scheduler = flow_scheduler(self.pipe, params.scheduler, self.label, params.scheduler_config)
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
            prompt=sentence_prompt(params.prompt),
            prompt_2=None,
            device=self.device,
            num_images_per_prompt=1,
            max_sequence_length=MAX_SEQUENCE_LENGTH,
            lora_scale=None,
        )
        prompt_embeds = self.for_transformer(prompt_embeds)  # T5's; the latents take its dtype
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

    def encode_references(
        self, images: Sequence[bytes], do_cfg: bool, conditioning: Conditioning
    ) -> Conditioning:
        """Redux (flux/redux.py): the reference images' tokens after the prompt's, and the
        text positions' ids as long, as `FluxPipeline.encode_prompt` makes them for the
        prior's `prompt_embeds`."""
        if not images:
            return {}
        held = redux.held_redux(self.pipe)
        if held is None:  # submit refuses this; a job stored before that lands here
            raise InvalidParameters(f"reference images on {self.label} need a Redux model")
        prompt_embeds, pooled = redux.with_image_tokens(
            held, images, conditioning[PROMPT_EMBEDS], conditioning[POOLED_EMBEDS]
        )
        text_ids = conditioning[TEXT_IDS]
        return {
            PROMPT_EMBEDS: prompt_embeds,
            POOLED_EMBEDS: pooled,
            TEXT_IDS: torch.zeros(prompt_embeds.shape[1], 3).to(text_ids.device, text_ids.dtype),
        }

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
    ) -> Schedule:
        dtype = conditioning[PROMPT_EMBEDS].dtype
        if masked is not None:
            return self._inpaint_start(scheduler, params, generator, masked, conditioning)
        if init_image is not None:
            image = fit_to(open_rgb(init_image), (params.width, params.height))
            return self._img2img_start(scheduler, params, generator, image, None, dtype)
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=dtype)
        noise = varied_noise(noise, params)  # A1111's variation seed, if any
        return Schedule(scheduler.timesteps, len(scheduler.timesteps), noise)

    def _img2img_start(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        image: Image.Image,
        crop: tuple[int, int, int, int] | None,
        dtype: torch.dtype,
    ) -> _Start:
        """`FluxImg2ImgPipeline` (and `FluxInpaintPipeline`, with a crop): the image
        encoded, the schedule trimmed by strength, the latents noised to its first step;
        the image latents and noise are kept on the schedule for inpaint's blending."""
        timesteps, steps = trim_schedule(scheduler, params)
        resize_mode = "fill" if crop is not None else "default"
        init = self.pipe.image_processor.preprocess(
            image, height=params.height, width=params.width, crops_coords=crop,
            resize_mode=resize_mode,
        ).to(dtype=torch.float32)  # fmt: skip
        latent_timestep = timesteps[:1].repeat(1)
        image_latents = self._encode_vae_image(init.to(self.device, dtype), generator)
        image_latents = torch.cat([image_latents], dim=0)
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=dtype)
        latents = scheduler.scale_noise(image_latents, latent_timestep, noise)
        return _Start(timesteps, steps, latents, image_latents, noise)

    def _inpaint_start(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        masked: MaskedImage,
        conditioning: Conditioning,
    ) -> Schedule:
        """`FluxInpaintPipeline`'s steps 2 to 5: as img2img, then the mask at latent size
        (all 16 channels), kept with the image latents and noise for `after_step`. The
        stock pipeline also encodes the masked image, which its transformer never reads
        (only Flux Fill's 384-channel one would) and after which nothing random is drawn:
        leaving it out changes no pixel."""
        dtype = conditioning[PROMPT_EMBEDS].dtype
        start = self._img2img_start(scheduler, params, generator, masked.image, masked.crop, dtype)
        resize_mode = "fill" if masked.crop is not None else "default"
        mask_condition = self._mask_processor().preprocess(
            masked.mask, height=params.height, width=params.width, resize_mode=resize_mode,
            crops_coords=masked.crop,
        )  # fmt: skip
        _, channels, height, width = start.latents.shape
        mask = torch.nn.functional.interpolate(mask_condition, size=(height, width))
        mask = mask.to(device=self.device, dtype=dtype).repeat(1, channels, 1, 1)
        conditioning[inpaint.MASK] = mask
        conditioning[inpaint.IMAGE_LATENTS] = start.image_latents
        conditioning[inpaint.NOISE] = start.noise
        return start

    def _encode_vae_image(self, image: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        # Flux's pipelines never upcast the VAE (see vae_precision).
        return vae_precision.encode(self.pipe.vae, image, generator, upcast=False)

    def _mask_processor(self) -> VaeImageProcessor:
        """`FluxInpaintPipeline.mask_processor` (the text-to-image pipeline has none)."""
        return VaeImageProcessor(
            vae_scale_factor=self.pipe.vae_scale_factor * 2,
            vae_latent_channels=self.pipe.vae.config.latent_channels,
            do_normalize=False,
            do_binarize=True,
            do_convert_grayscale=True,
        )

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
        text = {
            "pooled_projections": conditioning[POOLED_EMBEDS],
            "encoder_hidden_states": conditioning[PROMPT_EMBEDS],
            "txt_ids": conditioning[TEXT_IDS], "img_ids": conditioning[LATENT_IMAGE_IDS],
        }  # fmt: skip
        controlled = self._control_residuals(
            control, index, packed, timestep / 1000, guidance, text
        )
        with pipe.transformer.cache_context("cond"):
            noise_pred: torch.Tensor = pipe.transformer(
                hidden_states=self._transformer_input(packed, conditioning),
                timestep=timestep / 1000,
                guidance=embedded_guidance,
                joint_attention_kwargs={},
                return_dict=False,
                **text,
                **controlled,
            )[0]
        # The latents' own tokens: a family that appends tokens (Kontext's input image)
        # gets predictions for them too, which the step does not take.
        return _unpacked(noise_pred[:, : packed.size(1)], height, width)

    def _control_residuals(
        self,
        control: ControlGuide | None,
        index: int,
        packed: torch.Tensor,
        timestep: torch.Tensor,
        guidance: float,
        text: dict[str, torch.Tensor],
    ) -> dict[str, Any]:
        """What the job's ControlNets add to the transformer's call (`FluxControlNetPipeline`:
        they run first, on the same inputs); {} without control layers."""
        if control is None:
            return {}
        from app.engine.generation.guidance.flux_control import flux_residuals

        blocks, singles, repeat = flux_residuals(control, index, packed, timestep, guidance, text)
        return {
            "controlnet_block_samples": blocks, "controlnet_single_block_samples": singles,
            "controlnet_blocks_repeat": repeat,
        }  # fmt: skip

    def _transformer_input(self, packed: torch.Tensor, conditioning: Conditioning) -> torch.Tensor:
        """What the transformer reads besides the prompt: the packed latents (Flux.1 Fill
        appends its masked picture and mask to their channels, Kontext its input image's
        tokens after them)."""
        return packed

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image:
        pipe = self.pipe
        image = vae_precision.decode(pipe.vae, latents, upcast=False)  # as stock: no upcast
        pil: Image.Image = pipe.image_processor.postprocess(image, output_type="pil")[0]
        return pil


@dataclass(frozen=True)
class _Start(Schedule):
    """An img2img start, with what inpaint's blending keeps of it."""

    image_latents: torch.Tensor
    noise: torch.Tensor


def _unpacked(packed: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """`FluxPipeline._unpack_latents` for latents `height` x `width` (not pixels)."""
    batch, _, channels = packed.shape
    latents = packed.view(batch, height // 2, width // 2, channels // 4, 2, 2)
    latents = latents.permute(0, 3, 1, 4, 2, 5)
    return latents.reshape(batch, channels // 4, height, width)
