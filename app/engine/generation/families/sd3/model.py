"""SD 3 and 3.5 (medium, large, large turbo): an MMDiT on 16-channel latents, flow matching.

Mirrors `StableDiffusion3Pipeline.__call__` (and its img2img pipeline) call for call:
- the prompt through CLIP-L and CLIP-G (penultimate hidden states side by side, padded to
  T5's width; their pooled projections side by side) and T5 (256 tokens, padded); a
  pipeline loaded without T5 gets zeros there, as diffusers gives (`_get_t5_prompt_embeds`);
- true classifier-free guidance: the transformer runs on [negative, prompt] (cfg > 1);
- the flow-matching Euler scheduler from the model's config (its shift; `mu` only where the
  config asks for dynamic shifting), noise drawn as `prepare_latents` draws it;
- decoding undoes the VAE's scaling and shift factors.
img2img and inpaint mirror `StableDiffusion3Img2ImgPipeline` and
`StableDiffusion3InpaintPipeline` (16-channel transformers: the kept area blended back after
every step; "only masked" is its `padding_mask_crop`), with one deliberate difference: the
stock inpaint pipeline of diffusers 0.42 decodes without the VAE's shift factor (unlike its
own encoder and every other SD3 pipeline; diffusers issue #13611, "Issue 1"), which tints
the whole picture; Easel decodes every SD3 image as the text-to-image pipeline does, so an
inpaint's latents equal the stock pipeline's exactly and its pixels equal those latents
decoded with the shift.
Large turbo is the same pipeline with its own config: few steps and a low CFG (at cfg <= 1
the transformer runs once per step, as in the stock pipeline). Skip-layer guidance (an
opt-in argument of the stock pipeline, off by default) is not offered.

A checkpoint carries the prompt embeddings and pooled embeddings ([negative, prompt] under
CFG); the scheduler's state is its step index and sigmas (`schedulers.KINDS`).

Prompt weights: A1111's syntax (weights, BREAK, prompts longer than 75 tokens) is encoded
the A1111 way on the two CLIP encoders (`prompts.weights`); T5 gets the prompt's plain words
(`plain_text`: no brackets, no weights), unchunked, as the stock pipeline encodes them. A
plain prompt goes through the stock `encode_prompt`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from diffusers.pipelines.stable_diffusion_3.pipeline_stable_diffusion_3 import calculate_shift
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.families import flow
from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.sd3 import SD3
from app.engine.generation.loop import inpaint, vae_precision
from app.engine.generation.loop.variation import varied_noise
from app.engine.generation.prompts.loras import prompt_text
from app.engine.generation.prompts.weights import (
    ClipEncoders,
    encode_weighted,
    needs_a1111_encoding,
    plain_text,
)
from app.engine.jobs.init_image import fit_to, open_rgb
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide

PROMPT_EMBEDS = "prompt_embeds"  # [CLIP-L | CLIP-G, padded] ++ T5, per token
POOLED_EMBEDS = "pooled_embeds"  # CLIP-L's and CLIP-G's pooled projections side by side
T5_TOKENS = 256  # the stock pipeline's max_sequence_length
# Inpaint: the mask at latent size, the image's latents and the noise they are noised with.
INPAINT_TENSORS = (inpaint.MASK, inpaint.IMAGE_LATENTS, inpaint.NOISE)


class StableDiffusion3Family(flow.FlowFamily):
    """`StableDiffusion3Pipeline`'s models (SD 3 medium, SD 3.5 medium/large/large turbo)."""

    name = SD3.checkpoint_family  # as declared: what its checkpoints say
    label = SD3.checkpoint_label
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS, POOLED_EMBEDS)

    def native_size(self) -> int:
        return int(self.pipe.transformer.config.sample_size) * int(self.pipe.vae_scale_factor)

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        factor = self.pipe.vae_scale_factor
        channels = self.pipe.transformer.config.in_channels
        return (1, channels, params.height // factor, params.width // factor)

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        if params.is_inpaint:
            return (*self.checkpoint_tensors, *INPAINT_TENSORS)
        return self.checkpoint_tensors

    def scheduler(self, params: GenerationParams) -> Any:
        config = self.pipe.scheduler.config
        mu = None
        if config.get("use_dynamic_shifting", None):  # as __call__: from the latents' size
            patch = self.pipe.transformer.config.patch_size
            _, _, height, width = self.latent_shape(params)
            mu = calculate_shift(
                (height // patch) * (width // patch),
                config.get("base_image_seq_len", 256),
                config.get("max_image_seq_len", 4096),
                config.get("base_shift", 0.5),
                config.get("max_shift", 1.16),
            )
        scheduler = flow.flow_scheduler(
            self.pipe, params.scheduler, self.label, params.scheduler_config
        )
        # As `retrieve_timesteps(scheduler, steps, device, **scheduler_kwargs)`.
        kwargs = {} if mu is None else {"mu": mu}
        scheduler.set_timesteps(params.steps, device=self.pipe._execution_device, **kwargs)
        return scheduler

    def uses_cfg(self, params: GenerationParams) -> bool:
        return params.cfg > 1  # the stock pipeline's do_classifier_free_guidance

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        pipe = self.pipe
        prompt = prompt_text(params.prompt)  # without its <lora:...> tags, as A1111 does
        negative = params.negative_prompt
        if any(needs_a1111_encoding(text, pipe.tokenizer) for text in (prompt, negative)):
            cond, uncond, pooled, uncond_pooled = self._encode_weighted(prompt, negative, do_cfg)
        else:
            cond, uncond, pooled, uncond_pooled = pipe.encode_prompt(
                prompt=prompt,
                prompt_2=None,
                prompt_3=None,
                device=pipe._execution_device,
                num_images_per_prompt=1,
                do_classifier_free_guidance=do_cfg,
                negative_prompt=negative,  # "" is what the stock pipeline makes of None
                max_sequence_length=T5_TOKENS,
            )
        if do_cfg:
            cond, pooled = torch.cat([uncond, cond]), torch.cat([uncond_pooled, pooled])
        # CLIP's and T5's joined take T5's dtype where it runs wider; the latents take theirs.
        return {PROMPT_EMBEDS: self.for_transformer(cond), POOLED_EMBEDS: pooled}

    def clip_encoders(self) -> ClipEncoders:
        pipe = self.pipe
        return ClipEncoders(
            pairs=((pipe.tokenizer, pipe.text_encoder), (pipe.tokenizer_2, pipe.text_encoder_2)),
            device=pipe._execution_device,
            dtype=pipe.text_encoder.dtype,
            penultimate_and_pooled=True,
            pool_every_encoder=True,
        )

    def _encode_weighted(self, prompt: str, negative: str, do_cfg: bool) -> tuple[Any, ...]:
        """`encode_prompt`'s arithmetic with A1111's CLIP encoding (`encode_weighted`) and
        the plain words for T5."""
        cond, uncond, pooled, uncond_pooled = encode_weighted(
            self.clip_encoders(), prompt, negative, do_cfg
        )
        sides = [(cond, prompt)] + ([(uncond, negative)] if do_cfg else [])
        joined = [self._with_t5(clip, text) for clip, text in sides]
        return joined[0], joined[1] if do_cfg else None, pooled, uncond_pooled

    def _with_t5(self, clip: torch.Tensor, text: str) -> torch.Tensor:
        t5 = self.pipe._get_t5_prompt_embeds(
            prompt=plain_text(text), num_images_per_prompt=1, max_sequence_length=T5_TOKENS,
            device=self.pipe._execution_device,
        )  # fmt: skip
        clip = torch.nn.functional.pad(clip, (0, t5.shape[-1] - clip.shape[-1]))
        return torch.cat([clip, t5], dim=-2)

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
        if masked is not None:
            return self._inpaint_latents(scheduler, params, masked, generator, conditioning)
        if init_image is not None:
            return self._img2img_latents(scheduler, params, init_image, generator, dtype)
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=dtype)
        noise = varied_noise(noise, params)  # A1111's variation seed, if any
        return Schedule(scheduler.timesteps, params.steps, noise)

    def _img2img_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        init_png: bytes,
        generator: torch.Generator,
        dtype: torch.dtype,
    ) -> Schedule:
        """As `StableDiffusion3Img2ImgPipeline`: the trimmed schedule, the image encoded
        (its latent distribution sampled with the job's generator), shifted and scaled,
        then noised to the first remaining timestep (`scale_noise`)."""
        pipe = self.pipe
        timesteps, steps = flow.trim_schedule(scheduler, params)
        image = fit_to(open_rgb(init_png), (params.width, params.height))
        pixels = pipe.image_processor.preprocess(image, height=params.height, width=params.width)
        pixels = pixels.to(device=self.device, dtype=dtype)
        image_latents = self.encode_image(pixels, generator)
        noise = randn_tensor(image_latents.shape, generator=generator, device=self.device,
                             dtype=dtype)  # fmt: skip
        latents = scheduler.scale_noise(image_latents, timesteps[:1], noise)
        return Schedule(timesteps, steps, latents.to(device=self.device, dtype=dtype))

    def _inpaint_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        masked: inpaint.MaskedImage,
        generator: torch.Generator,
        conditioning: Conditioning,
    ) -> Schedule:
        """As `StableDiffusion3InpaintPipeline` (a 16-channel transformer: the kept area is
        blended back after every step), its steps 4 to 6, the random draws in its order:
        the image's latents, the start noise, the masked image's latents (drawn though a
        16-channel transformer does not read them). Adds what the steps need."""
        pipe, device = self.pipe, self.device
        dtype = conditioning[PROMPT_EMBEDS].dtype
        in_channels = pipe.transformer.config.in_channels
        if in_channels != pipe.vae.config.latent_channels:
            raise InvalidParameters(
                f"cannot inpaint with an {self.label} transformer of {in_channels} input channels"
            )
        timesteps, steps = flow.trim_schedule(scheduler, params)
        height, width = params.height, params.width
        resize_mode = "fill" if masked.crop is not None else "default"
        init = pipe.image_processor.preprocess(
            masked.image, height=height, width=width, crops_coords=masked.crop,
            resize_mode=resize_mode,
        ).to(dtype=torch.float32)  # fmt: skip
        # prepare_latents
        image_latents = self.encode_image(init.to(device=device, dtype=dtype), generator)
        image_latents = image_latents.repeat(1, 1, 1, 1)  # the batch repeat: a contiguous copy
        noise = randn_tensor(
            self.latent_shape(params), generator=generator, device=device, dtype=dtype
        )
        latents = noise
        if params.strength != 1.0:
            latents = scheduler.scale_noise(image_latents, timesteps[:1].repeat(1), noise)
        # prepare_mask_latents
        mask_condition = inpaint.mask_processor(pipe).preprocess(
            masked.mask, height=height, width=width, resize_mode=resize_mode,
            crops_coords=masked.crop,
        )  # fmt: skip
        blanked = (init * (mask_condition < 0.5)).to(device=device, dtype=dtype)
        factor = pipe.vae_scale_factor
        mask = torch.nn.functional.interpolate(
            mask_condition, size=(height // factor, width // factor)
        )
        mask = mask.to(device=device, dtype=dtype)
        self.encode_image(blanked, generator)  # the masked image's latents: only their draw
        conditioning[inpaint.MASK] = mask
        conditioning[inpaint.IMAGE_LATENTS] = image_latents
        conditioning[inpaint.NOISE] = noise
        return Schedule(timesteps, steps, latents)

    def encode_image(self, pixels: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        # SD 3.x's pipelines never upcast the VAE (see vae_precision).
        return vae_precision.encode(self.pipe.vae, pixels, generator, upcast=False)

    def resumed_schedule(self, scheduler: Any, params: GenerationParams) -> tuple[Any, int]:
        if params.init_image:
            return flow.trim_schedule(scheduler, params)
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
        timestep = t.expand(model_input.shape[0])
        noise_pred: torch.Tensor = self.pipe.transformer(
            hidden_states=model_input,
            timestep=timestep,
            encoder_hidden_states=conditioning[PROMPT_EMBEDS],
            pooled_projections=conditioning[POOLED_EMBEDS],
            joint_attention_kwargs=None,
            return_dict=False,
        )[0]
        if do_cfg:
            uncond, cond = noise_pred.chunk(2)
            noise_pred = uncond + guidance * (cond - uncond)
        return noise_pred

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image:
        image = vae_precision.decode(self.pipe.vae, latents, upcast=False)  # as stock
        pil: Image.Image = self.pipe.image_processor.postprocess(image, output_type="pil")[0]
        return pil
