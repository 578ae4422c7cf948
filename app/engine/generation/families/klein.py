"""Flux.2 Klein (4B, 9B; base and step-distilled): a Qwen3 language model's hidden states
(after layers 9, 18 and 27, side by side) as the text conditioning, a transformer on 2x2
patches of the VAE's latents, flow matching with an empirical resolution- and
steps-dependent shift, and true CFG on the base models (none on the distilled ones).

Mirrors `Flux2KleinPipeline.__call__` (diffusers 0.42) for text to image: the same calls,
in the same order, with the same arithmetic. One difference of form, none of numbers: the
loop keeps the latents as the 2x2-patched grid the pipeline draws its noise in,
(1, 4 * channels, h/16, w/16), and `predict` packs them into the transformer's token
sequence and back. Packing is a permutation and the scheduler's step is element by
element, so each step computes exactly the stock pipeline's values. The position ids of
the text and image tokens follow from the shapes alone and are made again at each step
(the checkpoint would cast them to the model's dtype).

What `GenerationParams` means here (see `flow_params`): on the base models, `cfg` is
classifier-free guidance, used above 1, with two transformer calls per step (the
conditional one, then the unconditional one, as the stock loop); the negative prompt is
what the unconditional call reads ("" by default, the stock pipeline's fixed choice). On
the distilled models (`is_distilled` in model_index.json) `cfg` is ignored, as the stock
pipeline ignores it, one call per step, and a negative prompt is refused. The sampler is
"Euler", the flow-matching Euler the folders ship. The prompt is given to Qwen3 in its
chat template, unchunked (512 tokens); A1111's weights and BREAK are dropped from it
(`flow.sentence_prompt`). Not here: Klein's reference images (image editing), img2img and
inpaint (diffusers' Klein inpaint pipeline is another loop), single and split files. A
LoRA (diffusers' Flux.2 format) goes through the common loader path (`load_lora_weights`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from diffusers.pipelines.flux2.pipeline_flux2_klein import (
    compute_empirical_mu,
    retrieve_timesteps,
)
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import FlowFamily, flow_scheduler, sentence_prompt
from app.engine.generation.flow_params import FLOW_SIZE_MULTIPLE
from app.engine.generation.variation import varied_noise
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.control import ControlGuide
    from app.engine.generation.inpaint import MaskedImage

PROMPT_EMBEDS = "prompt_embeds"  # Qwen3's three hidden-state layers, per token
NEGATIVE_EMBEDS = "negative_prompt_embeds"  # the same of the negative prompt (CFG only)
MAX_SEQUENCE_LENGTH = 512  # the stock pipeline's default: Qwen3 tokens read
TEXT_ENCODER_OUT_LAYERS = (9, 18, 27)  # the stock pipeline's default


class Flux2KleinFamily(FlowFamily):
    """`Flux2KleinPipeline`'s models, base (true CFG) and step-distilled (none)."""

    name = "flux2-klein"
    label = "Flux.2 Klein"
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
        if self.uses_cfg(params):
            return (*self.checkpoint_tensors, NEGATIVE_EMBEDS)
        return self.checkpoint_tensors

    def scheduler(self, params: GenerationParams) -> Any:
        """The stock pipeline's step 6: sigmas 1 .. 1/steps, shifted by the empirical mu
        of the number of image patches and steps; then `set_begin_index(0)` as before its
        loop."""
        scheduler = flow_scheduler(self.pipe, params.scheduler, self.label)
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
        embeds: torch.Tensor = prompt_embeds
        return embeds

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
    ) -> Schedule:
        if init_image is not None or masked is not None:
            raise InvalidParameters(f"{self.label} runs text to image only in Easel for now")
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
        latent_ids = pipe._prepare_latent_ids(latents).to(self.device)
        packed = pipe._pack_latents(latents)  # (1, C, H, W) -> (1, H*W, C)
        timestep = t.expand(packed.shape[0]).to(packed.dtype)
        model_input = packed.to(pipe.transformer.dtype)
        noise_pred = self._transformer(
            "cond", model_input, timestep, conditioning[PROMPT_EMBEDS], latent_ids
        )
        if do_cfg:
            negative = self._transformer(
                "uncond", model_input, timestep, conditioning[NEGATIVE_EMBEDS], latent_ids
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
        latent_ids: torch.Tensor,
    ) -> torch.Tensor:
        pipe = self.pipe
        text_ids = pipe._prepare_text_ids(prompt_embeds).to(self.device)
        with pipe.transformer.cache_context(context):
            noise_pred: torch.Tensor = pipe.transformer(
                hidden_states=model_input,
                timestep=timestep / 1000,
                guidance=None,
                encoder_hidden_states=prompt_embeds,
                txt_ids=text_ids,
                img_ids=latent_ids,
                joint_attention_kwargs=None,
                return_dict=False,
            )[0]
        return noise_pred[:, : model_input.size(1) :]

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image:
        """The stock pipeline after its loop: the VAE's batch-norm normalisation undone,
        the 2x2 patches back to the VAE's latent grid, decoded."""
        pipe = self.pipe
        latents = denormalised(pipe, latents)
        image = pipe.vae.decode(latents, return_dict=False)[0]
        pil: Image.Image = pipe.image_processor.postprocess(image, output_type="pil")[0]
        return pil


def denormalised(pipe: Any, latents: torch.Tensor) -> torch.Tensor:
    """Patched, normalised latents as the Flux.2 VAE decodes them (the stock pipeline's
    arithmetic after its loop): times the batch norm's std, plus its mean, unpatchified."""
    bn = pipe.vae.bn
    mean = bn.running_mean.view(1, -1, 1, 1).to(latents.device, latents.dtype)
    std = torch.sqrt(bn.running_var.view(1, -1, 1, 1) + pipe.vae.config.batch_norm_eps)
    latents = latents * std.to(latents.device, latents.dtype) + mean
    unpatched: torch.Tensor = pipe._unpatchify_latents(latents)
    return unpatched
