"""Z-Image (Turbo): a Qwen3 text encoder's hidden states, a single-stream DiT on 2x2
patches of 16-channel latents (Flux.1's VAE), flow matching with a fixed shift.

Mirrors `ZImagePipeline.__call__` (diffusers 0.42), and for img2img and inpaint
`ZImageImg2ImgPipeline` and `ZImageInpaintPipeline`, call for call:
- the prompt in Qwen3's chat template (`apply_chat_template`, thinking on), padded to 512
  tokens, the second-to-last hidden states of its real tokens only (`encode_prompt`): one
  tensor per text, of the prompt's own length;
- CFG as the stock pipeline does it: on whenever `guidance_scale > 0` (Turbo runs at 0:
  one transformer call per step), `pos + cfg * (pos - neg)` in float32, the transformer
  given [prompt, negative] as a list; CFG truncation at its default of 1.0 (no step drops
  the guidance) and no CFG normalisation (its default), both kept as the stock loop has them;
- sigmas 1 .. 1/steps, `mu` from the patch count (used only where a scheduler config asks
  for dynamic shifting; the released one shifts by 3), then `set_begin_index(0)`;
- the transformer's timestep is `(1000 - t) / 1000` and its output negated (it predicts the
  opposite velocity of Flux's); latents in float32 throughout, cast to the transformer's
  dtype only as its input;
- decoding undoes the VAE's scaling and shift factors;
- img2img and inpaint: the schedule trimmed by strength as `get_timesteps` (4 steps at 0.6
  run 3), the image encoded and noised to the first remaining step (`scale_noise`), both
  in the prompt embeddings' dtype;
- inpaint: the mask binarised by the pipeline's mask processor and shrunk to latent size
  (nearest, one channel); after every step the kept area goes back to the image latents
  noised to the next timestep (none after the last), `(1 - mask) * image + mask * latents`.
  The transformer never sees the mask, so the masked image's latents the stock pipeline
  also encodes (for callbacks only, after the last random draw) are left out: no pixel
  changes. "Only masked" (A1111's inpaint area) is the other inpaint pipelines' crop
  (`padding_mask_crop`, which this one lacks): the mask's box plus padding, widened to the
  job's aspect ratio, generated at the job's size and pasted back through the mask.

What `GenerationParams` means here (see `flow_params`): `cfg` is the stock pipeline's
`guidance_scale` (0 for Turbo; note it is `pos + cfg * (pos - neg)`, so Z-Image's 1 is
SD's 2); the sampler is "Euler", the folder's flow-matching Euler. A1111's `(word:1.2)`
weights and BREAK are dropped from the prompt, not applied: the encoder is a chat LLM
that reads sentences (`flow.sentence_prompt`). `strength` is the stock img2img and inpaint
pipelines' (their default, 1.0, starts from pure noise while still keeping the unmasked
area). No ControlNet or IP-Adapter here.

A checkpoint carries the prompt's hidden states (and the negative's, under CFG), for an
inpaint the mask, the image latents and the blending noise (`inpaint.MASK`, ...); the
scheduler's state is its step index and sigmas (`schedulers.KINDS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from diffusers.pipelines.z_image.pipeline_z_image import (
    calculate_shift,
    get_default_z_image_sigmas,
    retrieve_timesteps,
)
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import (
    FlowFamily,
    flow_scheduler,
    sentence_prompt,
    trim_schedule,
)
from app.engine.generation.families.flow_params import FLOW_SIZE_MULTIPLE
from app.engine.generation.families.zimage import ZIMAGE
from app.engine.generation.loop import inpaint, vae_precision
from app.engine.generation.loop.variation import varied_noise
from app.engine.jobs.init_image import fit_to, open_rgb
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide
    from app.engine.generation.loop.inpaint import MaskedImage

PROMPT_EMBEDS = "prompt_embeds"  # the prompt's hidden states, (its tokens, width)
NEGATIVE_EMBEDS = "negative_embeds"  # the negative prompt's, under CFG
MAX_SEQUENCE_LENGTH = 512  # the stock pipeline's default: tokens the encoder reads
CFG_TRUNCATION = 1.0  # the stock default: guidance dropped only where (1000 - t) / 1000 > it


class ZImageFamily(FlowFamily):
    """`ZImagePipeline`'s models (Z-Image Turbo and the base model)."""

    name = ZIMAGE.checkpoint_family  # as declared: what its checkpoints say
    label = ZIMAGE.checkpoint_label
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS,)

    @property
    def dtype(self) -> torch.dtype:
        """float32: the stock loop keeps its latents in float32 whatever the transformer's
        dtype (it casts them for each call), so restored latents must be float32 too; the
        restored hidden states are cast back to the text encoder's dtype in `predict`,
        exactly (float32 holds every bf16/fp16 value)."""
        return torch.float32

    def native_size(self) -> int:
        return 1024  # the released models' (the transformer's config states none)

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        if params.width % FLOW_SIZE_MULTIPLE or params.height % FLOW_SIZE_MULTIPLE:
            raise InvalidParameters(
                f"{self.label} draws sizes in multiples of {FLOW_SIZE_MULTIPLE} pixels, "
                f"not {params.width}x{params.height}"
            )
        factor = self.pipe.vae_scale_factor * 2  # as `prepare_latents`
        channels = self.pipe.transformer.in_channels
        return (1, channels, 2 * (params.height // factor), 2 * (params.width // factor))

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        needs = self.checkpoint_tensors
        if self.uses_cfg(params):
            needs = (*needs, NEGATIVE_EMBEDS)
        if params.is_inpaint:
            needs = (*needs, inpaint.MASK, inpaint.IMAGE_LATENTS, inpaint.NOISE)
        return needs

    def scheduler(self, params: GenerationParams) -> Any:
        """The stock pipeline's step 5: Z-Image's default sigmas, `mu` from the number of
        image patches, then `set_begin_index(0)` as before its loop."""
        scheduler = flow_scheduler(self.pipe, params.scheduler, self.label, params.scheduler_config)
        _, _, height, width = self.latent_shape(params)
        config = scheduler.config
        mu = calculate_shift(
            (height // 2) * (width // 2),
            config.get("base_image_seq_len", 256),
            config.get("max_image_seq_len", 4096),
            config.get("base_shift", 0.5),
            config.get("max_shift", 1.15),
        )
        sigmas = get_default_z_image_sigmas(params.steps)
        retrieve_timesteps(scheduler, params.steps, self.device, sigmas=sigmas, mu=mu)
        scheduler.set_begin_index(0)
        return scheduler

    def uses_cfg(self, params: GenerationParams) -> bool:
        return params.cfg > 0  # the stock pipeline's do_classifier_free_guidance

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        prompt_embeds, negative_embeds = self.pipe.encode_prompt(
            prompt=sentence_prompt(params.prompt),
            device=self.device,
            do_classifier_free_guidance=do_cfg,
            negative_prompt=sentence_prompt(params.negative_prompt),  # "": the stock None
            max_sequence_length=MAX_SEQUENCE_LENGTH,
        )
        # The stock text-to-image loop takes the embeddings as encoded (float32 where Qwen3
        # runs wider than a float16 transformer, `device.precision`); the stock img2img and
        # inpaint pipelines encode the picture in the embeddings' dtype, which a float16 VAE
        # refuses, so their users pass embeddings cast to the transformer's: as here.
        wanted = self.pipe.transformer.dtype if params.init_image else prompt_embeds[0].dtype
        conditioning = {PROMPT_EMBEDS: prompt_embeds[0].to(wanted)}
        if do_cfg:
            conditioning[NEGATIVE_EMBEDS] = negative_embeds[0].to(wanted)
        return conditioning

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
            return self._inpaint_latents(scheduler, params, masked, generator, conditioning)
        shape = self.latent_shape(params)
        if init_image is not None:
            image = fit_to(open_rgb(init_image), (params.width, params.height))
            pixels = self.pipe.image_processor.preprocess(image).to(dtype=torch.float32)
            return self._noised_image(scheduler, params, pixels, generator, conditioning).schedule
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=torch.float32)
        noise = varied_noise(noise, params)  # A1111's variation seed, if any
        return Schedule(scheduler.timesteps, params.steps, noise)

    def _noised_image(
        self,
        scheduler: Any,
        params: GenerationParams,
        pixels: torch.Tensor,
        generator: torch.Generator,
        conditioning: Conditioning,
    ) -> _Start:
        """As `ZImageImg2ImgPipeline` (and `ZImageInpaintPipeline`'s `prepare_latents`): the
        trimmed schedule (`get_timesteps`), the preprocessed image `pixels` encoded (its
        latent distribution sampled with the job's generator), shifted and scaled, then
        noised to the first remaining timestep (`scale_noise`), in the prompt embeddings'
        dtype as their `prepare_latents` is called; the image latents and the noise are kept
        for inpaint's blending."""
        dtype = conditioning[PROMPT_EMBEDS].dtype
        timesteps, steps = trim_schedule(scheduler, params)
        if steps < 1:
            raise InvalidParameters(
                f"strength {params.strength:g} leaves no step of {params.steps} to run"
            )
        pixels = pixels.to(device=self.device, dtype=dtype)
        # Z-Image's pipelines never upcast the VAE (see vae_precision).
        image_latents = vae_precision.encode(self.pipe.vae, pixels, generator, upcast=False)
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=dtype)
        latents = scheduler.scale_noise(image_latents, timesteps[:1].repeat(1), noise)
        return _Start(Schedule(timesteps, steps, latents), image_latents, noise)

    def _inpaint_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        masked: MaskedImage,
        generator: torch.Generator,
        conditioning: Conditioning,
    ) -> Schedule:
        """`ZImageInpaintPipeline`'s start: the image and the binarised mask preprocessed
        at the job's size, the image noised as img2img, the mask at latent size (nearest,
        one channel), kept with the image latents and the noise for `after_step`.

        Two differences of form, none of numbers. The stock pipeline also encodes the
        masked image, which its loop never reads (the transformer takes no mask) and after
        which nothing random is drawn: leaving it out changes no pixel. It has no
        `padding_mask_crop`; "only masked" is the other inpaint pipelines' crop (the box
        cut out and resized with `resize_mode="fill"`, then pasted back through the mask),
        which equals calling the stock pipeline on the cut-out box."""
        crop = masked.crop
        resize_mode = "fill" if crop is not None else "default"
        size = {"height": params.height, "width": params.width}
        image = self.pipe.image_processor.preprocess(
            masked.image, **size, crops_coords=crop, resize_mode=resize_mode
        ).to(dtype=torch.float32)
        mask_condition = inpaint.mask_processor(self.pipe, patch=2).preprocess(
            masked.mask, **size, crops_coords=crop, resize_mode=resize_mode
        )
        start = self._noised_image(scheduler, params, image, generator, conditioning)
        _, _, height, width = self.latent_shape(params)
        mask = torch.nn.functional.interpolate(mask_condition, size=(height, width), mode="nearest")
        conditioning[inpaint.MASK] = mask.to(device=self.device, dtype=start.noise.dtype)
        conditioning[inpaint.IMAGE_LATENTS] = start.image_latents
        conditioning[inpaint.NOISE] = start.noise
        return start.schedule

    def resumed_schedule(self, scheduler: Any, params: GenerationParams) -> tuple[Any, int]:
        if params.init_image:
            return trim_schedule(scheduler, params)
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
        transformer = self.pipe.transformer
        dtype = transformer.dtype
        # The embeddings as the stock loop passes them: in the text encoder's dtype, which
        # is wider than the transformer's on a float16-only device (device.precision; the
        # transformer takes them so). A checkpoint restores them in float32: cast back.
        embeds_dtype = self.pipe.text_encoder.dtype
        timestep = t.expand(latents.shape[0])
        timestep = (1000 - timestep) / 1000
        scale = guidance
        if do_cfg and float(timestep[0].item()) > CFG_TRUNCATION:
            scale = 0.0  # never at the default truncation; kept as the stock loop has it
        apply_cfg = do_cfg and scale > 0
        embeds = [conditioning[PROMPT_EMBEDS].to(embeds_dtype)]
        if apply_cfg:
            model_input = latents.to(dtype).repeat(2, 1, 1, 1)
            embeds.append(conditioning[NEGATIVE_EMBEDS].to(embeds_dtype))
            timestep = timestep.repeat(2)
        else:
            model_input = latents.to(dtype)
        model_input = model_input.unsqueeze(2)
        outputs = transformer(
            list(model_input.unbind(dim=0)),
            timestep,
            embeds,
            joint_attention_kwargs=None,
            return_dict=False,
        )[0]
        if apply_cfg:
            pos, neg = outputs[0].float(), outputs[1].float()
            noise_pred = torch.stack([pos + scale * (pos - neg)], dim=0)
        else:
            noise_pred = torch.stack([out.float() for out in outputs], dim=0)
        noise_pred = -noise_pred.squeeze(2)
        return noise_pred.to(torch.float32)

    def blend_dtype(self) -> torch.dtype:
        """`ZImageInpaintPipeline` blends in the prompt embeddings' dtype, which for a job
        with a picture is the transformer's (`encode`); a checkpoint restores the tensors in
        float32, so they are cast back (exactly: they hold its values) and a resumed job
        blends in the same arithmetic as an uninterrupted one (without it a bfloat16 job
        resumed 21/255 off)."""
        dtype: torch.dtype = self.pipe.transformer.dtype
        return dtype

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image:
        # In the VAE's dtype, as the stock pipeline casts them; never upcast (vae_precision).
        image = vae_precision.decode(self.pipe.vae, latents, upcast=False)
        pil: Image.Image = self.pipe.image_processor.postprocess(image, output_type="pil")[0]
        return pil


@dataclass(frozen=True)
class _Start:
    """An img2img start, with what inpaint's blending keeps of it."""

    schedule: Schedule
    image_latents: torch.Tensor
    noise: torch.Tensor
