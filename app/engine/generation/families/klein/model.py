"""Flux.2 Klein (4B, 9B; base and step-distilled): a Qwen3 language model's hidden states
(after layers 9, 18 and 27, side by side) as the text conditioning, a transformer on 2x2
patches of the VAE's latents, flow matching with an empirical resolution- and
steps-dependent shift, and true CFG on the base models (none on the distilled ones).

Mirrors `Flux2KleinPipeline.__call__` (diffusers 0.42) for text to image, and
`Flux2KleinInpaintPipeline.__call__` for inpaint: the same calls, in the same order, with
the same arithmetic. One difference of form, none of numbers: the loop keeps the latents
as the 2x2-patched grid the pipelines draw their noise in, (1, 4 * channels, h/16, w/16),
and `predict` packs them into the transformer's token sequence and back. Packing is a
permutation and the scheduler's step (and inpaint's blending) is element by element, so
each step computes exactly the stock pipeline's values. The position ids of the text and
image tokens follow from the shapes alone and are made again at each step (the checkpoint
would cast them to the model's dtype).

Inpaint, as the stock inpaint pipeline: the schedule is the text-to-image one (its mu from
all `steps`) trimmed by `strength` (`flow.trim_schedule`, its `get_timesteps`); the
picture is encoded to the mode of the VAE's distribution (nothing random), patched and
normalised by the VAE's batch norm; the noise is drawn and the latents noised to the first
timestep; the mask, binarised, goes bilinear to the patch grid. Every transformer call
sees the picture's latents too, as reference tokens after the latents' own (time offset
10, the pipeline's `prepare_image_latents`), and after each step the kept area goes back to
the picture's latents noised to the next timestep. The mask, the image latents and the
noise are in the conditioning, so a checkpoint carries them. "Only masked" is the
pipeline's `padding_mask_crop`: the mask's box plus padding, widened to the job's aspect
ratio, generated at the job's size and pasted back through the mask (`inpaint.paste_back`,
its `apply_overlay`). The stock pipeline draws at the picture's own size (its `height` and
`width` are ignored), first shrunk to 1 MP if larger; Easel draws at the job's size, which
for an inpaint is the picture's (the window's mask editor sends it so): the same image
there, and a job over 1 MP is drawn as asked rather than shrunk.

What `GenerationParams` means here (see `flow_params`): on the base models, `cfg` is
classifier-free guidance, used above 1, with two transformer calls per step (the
conditional one, then the unconditional one, as the stock loop); the negative prompt is
what the unconditional call reads ("" by default, the stock pipelines' fixed choice). On
the distilled models (`is_distilled` in model_index.json) `cfg` is ignored, as the stock
pipelines ignore it, one call per step, and a negative prompt is refused. The sampler is
"Euler", the flow-matching Euler the folders ship. The prompt is given to Qwen3 in its
chat template, unchunked (512 tokens); A1111's weights and BREAK are dropped from it
(`flow.sentence_prompt`). Not here: img2img (an init image without a mask: diffusers has no
Klein img2img pipeline to mirror, so submit refuses it), Klein's reference images (image
editing, and the inpaint pipeline's `image_reference`: Easel's jobs have no input for
them), single and split files. A LoRA (diffusers' Flux.2 format) goes through the common
loader path (`load_lora_weights`).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from diffusers.pipelines.flux2.image_processor import Flux2ImageProcessor
from diffusers.pipelines.flux2.pipeline_flux2_klein import (
    compute_empirical_mu,
    retrieve_timesteps,
)
from diffusers.pipelines.flux2.pipeline_flux2_klein_inpaint import Flux2KleinInpaintPipeline
from diffusers.utils.torch_utils import get_module_execution_device, randn_tensor
from PIL import Image

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import (
    FlowFamily,
    flow_scheduler,
    sentence_prompt,
    trim_schedule,
)
from app.engine.generation.families.flow_params import FLOW_SIZE_MULTIPLE, KLEIN_IMG2IMG_REFUSAL
from app.engine.generation.families.klein import FLUX2_KLEIN
from app.engine.generation.loop import inpaint, vae_precision
from app.engine.generation.loop.variation import varied_noise
from app.engine.generation.preview import (
    TINY_VAE_MAX_PARAMS,
    LinearPreviewer,
    png_of,
    preview_size,
    to_uint8_hwc,
)
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide
    from app.engine.generation.loop.inpaint import MaskedImage

PROMPT_EMBEDS = "prompt_embeds"  # Qwen3's three hidden-state layers, per token
NEGATIVE_EMBEDS = "negative_prompt_embeds"  # the same of the negative prompt (CFG only)
MAX_SEQUENCE_LENGTH = 512  # the stock pipeline's default: Qwen3 tokens read
TEXT_ENCODER_OUT_LAYERS = (9, 18, 27)  # the stock pipeline's default


class Flux2KleinFamily(FlowFamily):
    """`Flux2KleinPipeline`'s models, base (true CFG) and step-distilled (none)."""

    name = FLUX2_KLEIN.checkpoint_family  # as declared: what its checkpoints say
    label = FLUX2_KLEIN.checkpoint_label
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS,)

    @property
    def is_distilled(self) -> bool:
        return bool(self.pipe.config.is_distilled)

    def native_size(self) -> int:
        return int(self.pipe.default_sample_size) * int(self.pipe.vae_scale_factor)  # 1024

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        if params.width % FLOW_SIZE_MULTIPLE or params.height % FLOW_SIZE_MULTIPLE:
            raise InvalidParameters(
                f"{self.label} draws sizes in multiples of {FLOW_SIZE_MULTIPLE} pixels, "
                f"not {params.width}x{params.height}"
            )
        # As `prepare_latents`: the 2x2 patches of 2 * (side // (vae_scale_factor * 2)).
        factor = self.pipe.vae_scale_factor * 2
        channels = self.pipe.transformer.config.in_channels
        return (1, channels, params.height // factor, params.width // factor)

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        needs = self.checkpoint_tensors
        if self.uses_cfg(params):
            needs = (*needs, NEGATIVE_EMBEDS)
        if params.is_inpaint:
            needs = (*needs, inpaint.MASK, inpaint.IMAGE_LATENTS, inpaint.NOISE)
        return needs

    def scheduler(self, params: GenerationParams) -> Any:
        """The stock pipeline's step 6: sigmas 1 .. 1/steps, shifted by the empirical mu
        of the number of image patches and steps; then `set_begin_index(0)` as before its
        loop."""
        scheduler = flow_scheduler(self.pipe, params.scheduler, self.label, params.scheduler_config)
        steps = params.steps
        sigmas: Any = np.linspace(1.0, 1 / steps, steps)
        if getattr(scheduler.config, "use_flow_sigmas", False):
            sigmas = None
        _, _, height, width = self.latent_shape(params)
        mu = compute_empirical_mu(image_seq_len=height * width, num_steps=steps)
        retrieve_timesteps(scheduler, steps, self.device, sigmas=sigmas, mu=mu)
        scheduler.set_begin_index(0)
        return scheduler

    def uses_cfg(self, params: GenerationParams) -> bool:
        # The stock pipeline's `do_classifier_free_guidance`.
        return params.cfg > 1 and not self.is_distilled

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        if self.is_distilled and params.negative_prompt.strip():
            raise InvalidParameters(
                "this Flux.2 Klein model is step-distilled and runs without CFG, so it takes "
                "no negative prompt; clear the negative prompt"
            )
        conditioning = {PROMPT_EMBEDS: self._embeds(sentence_prompt(params.prompt))}
        if do_cfg:
            conditioning[NEGATIVE_EMBEDS] = self._embeds(sentence_prompt(params.negative_prompt))
        return conditioning

    def _embeds(self, prompt: str) -> torch.Tensor:
        prompt_embeds, _text_ids = self.pipe.encode_prompt(
            prompt=prompt,
            device=self.device,
            num_images_per_prompt=1,
            max_sequence_length=MAX_SEQUENCE_LENGTH,
            text_encoder_out_layers=TEXT_ENCODER_OUT_LAYERS,
        )
        return self.for_transformer(prompt_embeds)  # Qwen3's; the latents take its dtype

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
        if init_image is not None:  # submit refuses it (flow_params); a stored job lands here
            raise InvalidParameters(KLEIN_IMG2IMG_REFUSAL)
        dtype = conditioning[PROMPT_EMBEDS].dtype
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=dtype)
        noise = varied_noise(noise, params)  # A1111's variation seed, if any
        return Schedule(scheduler.timesteps, len(scheduler.timesteps), noise)

    def resumed_schedule(self, scheduler: Any, params: GenerationParams) -> tuple[Any, int]:
        if params.is_inpaint:
            return trim_schedule(scheduler, params)
        return scheduler.timesteps, len(scheduler.timesteps)

    def _inpaint_start(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        masked: MaskedImage,
        conditioning: Conditioning,
    ) -> Schedule:
        """`Flux2KleinInpaintPipeline`'s steps 2 to 6: the schedule trimmed by strength
        (`get_timesteps`, after the empirical mu of all `steps`); the picture preprocessed,
        encoded (the latent distribution's mode: nothing random), patched and normalised;
        the noise drawn and the latents noised to the first timestep; the mask binarised
        and shrunk (bilinear) to the patch grid. The image latents, mask and noise are kept
        in the conditioning: `predict` shows the transformer the image latents as reference
        tokens, `after_step` blends the kept area back."""
        pipe = self.pipe
        dtype = conditioning[PROMPT_EMBEDS].dtype
        timesteps, steps = trim_schedule(scheduler, params)
        resize_mode = "fill" if masked.crop is not None else "default"
        init = self._processor(mask=False).preprocess(
            masked.image, params.height, params.width, crops_coords=masked.crop,
            resize_mode=resize_mode,
        )  # fmt: skip
        latent_timestep = timesteps[:1].repeat(1)
        vae_device = get_module_execution_device(pipe.vae)
        # The stock pipeline's own encode (patchified, batch-normalised), never upcast but
        # in float32 after a NaN (vae_precision).
        image_latents = vae_precision.run_encoder(
            pipe.vae, init.to(vae_device, dtype), False,
            lambda pixels: pipe._encode_vae_image(pixels, generator),
        )  # fmt: skip
        image_latents = image_latents.to(self.device)
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=dtype)
        latents = scheduler.scale_noise(image_latents, latent_timestep, noise)
        mask_condition = self._processor(mask=True).preprocess(
            masked.mask, height=params.height, width=params.width, resize_mode=resize_mode,
            crops_coords=masked.crop,
        )  # fmt: skip
        grid = shape[2:]  # `prepare_mask_latents`: straight to the patch grid, bilinear
        mask = torch.nn.functional.interpolate(mask_condition, size=grid, mode="bilinear")
        conditioning[inpaint.MASK] = mask.to(device=self.device, dtype=dtype)
        conditioning[inpaint.IMAGE_LATENTS] = image_latents
        conditioning[inpaint.NOISE] = noise
        return Schedule(timesteps, steps, latents)

    def _processor(self, mask: bool) -> Flux2ImageProcessor:
        """`Flux2KleinInpaintPipeline.image_processor`, or its `mask_processor` (the text to
        image pipeline has none)."""
        pipe = self.pipe
        factor, channels = pipe.vae_scale_factor * 2, pipe.vae.config.latent_channels
        if not mask:
            return Flux2ImageProcessor(vae_scale_factor=factor, vae_latent_channels=channels)
        return Flux2ImageProcessor(
            vae_scale_factor=factor, vae_latent_channels=channels, do_normalize=False,
            do_binarize=True, do_convert_rgb=False, do_convert_grayscale=True,
        )  # fmt: skip

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
        latent_ids = pipe._prepare_latent_ids(latents).to(self.device)
        packed = pipe._pack_latents(latents)  # (1, C, H, W) -> (1, H*W, C)
        timestep = t.expand(packed.shape[0]).to(packed.dtype)
        model_input, image_ids = packed, latent_ids
        if inpaint.IMAGE_LATENTS in conditioning:
            # Inpaint: the picture's latents follow as reference tokens, at time offset 10,
            # as the stock inpaint pipeline's `prepare_image_latents` of `[image_latents]`.
            reference = conditioning[inpaint.IMAGE_LATENTS]
            reference_ids = Flux2KleinInpaintPipeline._prepare_image_ids([reference], 1)
            model_input = torch.cat([packed, pipe._pack_latents(reference)], dim=1)
            image_ids = torch.cat([latent_ids, reference_ids.to(self.device)], dim=1)
        model_input = model_input.to(pipe.transformer.dtype)
        tokens = packed.size(1)
        noise_pred = self._transformer(
            "cond", model_input, timestep, conditioning[PROMPT_EMBEDS], image_ids, tokens
        )
        if do_cfg:
            negative = self._transformer(
                "uncond", model_input, timestep, conditioning[NEGATIVE_EMBEDS], image_ids, tokens
            )
            noise_pred = negative + guidance * (noise_pred - negative)
        batch, channels, height, width = latents.shape
        return noise_pred.permute(0, 2, 1).reshape(batch, channels, height, width)

    def _transformer(
        self,
        context: str,
        model_input: torch.Tensor,
        timestep: torch.Tensor,
        prompt_embeds: torch.Tensor,
        image_ids: torch.Tensor,
        tokens: int,
    ) -> torch.Tensor:
        """One transformer call; its output for the first `tokens` (the latents' own)."""
        pipe = self.pipe
        text_ids = pipe._prepare_text_ids(prompt_embeds).to(self.device)
        with pipe.transformer.cache_context(context):
            noise_pred: torch.Tensor = pipe.transformer(
                hidden_states=model_input,
                timestep=timestep / 1000,
                guidance=None,
                encoder_hidden_states=prompt_embeds,
                txt_ids=text_ids,
                img_ids=image_ids,
                joint_attention_kwargs=None,
                return_dict=False,
            )[0]
        return noise_pred[:, :tokens]

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image:
        """The stock pipeline after its loop: the VAE's batch-norm normalisation undone,
        the 2x2 patches back to the VAE's latent grid, decoded."""
        pipe = self.pipe
        image = vae_precision.run_decoder(pipe.vae, latents, False, partial(_decoded, pipe))
        pil: Image.Image = pipe.image_processor.postprocess(image, output_type="pil")[0]
        return pil


def _decoded(pipe: Any, latents: torch.Tensor) -> torch.Tensor:
    image: torch.Tensor = pipe.vae.decode(denormalised(pipe, latents), return_dict=False)[0]
    return image


def denormalised(pipe: Any, latents: torch.Tensor) -> torch.Tensor:
    """Patched, normalised latents as the Flux.2 VAE decodes them (the stock pipeline's
    arithmetic after its loop): times the batch norm's std, plus its mean, unpatchified."""
    bn = pipe.vae.bn
    mean = bn.running_mean.view(1, -1, 1, 1).to(latents.device, latents.dtype)
    std = torch.sqrt(bn.running_var.view(1, -1, 1, 1) + pipe.vae.config.batch_norm_eps)
    latents = latents * std.to(latents.device, latents.dtype) + mean
    unpatched: torch.Tensor = pipe._unpatchify_latents(latents)
    return unpatched


class Flux2Previewer:
    """Previews of Flux.2's latents, 2x2 patches normalised by the VAE's batch norm
    (`denormalised`): denormalised and unpatchified first, then decoded (a tiny VAE) or
    mapped to grey; the declaration names it (`FamilySpec.preview`)."""

    def __init__(self, pipe: Any) -> None:
        self._pipe = pipe
        self._tiny = sum(p.numel() for p in pipe.vae.parameters()) <= TINY_VAE_MAX_PARAMS
        channels = int(pipe.vae.config.latent_channels)
        self._linear = LinearPreviewer(torch.full((channels, 3), 1.0 / channels))

    @torch.no_grad()
    def png(self, latents: torch.Tensor, image_size: tuple[int, int]) -> bytes:
        unpatched = denormalised(self._pipe, latents)
        if not self._tiny:
            return self._linear.png(unpatched, image_size)
        width, height = preview_size(image_size)
        factor = int(self._pipe.vae_scale_factor)
        size = (-(-height // factor), -(-width // factor))
        if unpatched.shape[-2] > size[0] or unpatched.shape[-1] > size[1]:
            unpatched = torch.nn.functional.interpolate(unpatched, size=size, mode="area")
        vae = self._pipe.vae
        decoded = vae_precision.run_decoder(
            vae, unpatched, False, lambda z: vae.decode(z, return_dict=False)[0], check=False
        )  # in float32 after a NaN, as the family's decode
        return png_of(to_uint8_hwc(decoded[0].permute(1, 2, 0)), image_size)
