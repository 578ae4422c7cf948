"""Chroma: T5's sequence (its padding masked but for one token) and a Flux.1-schnell-shaped
transformer on 2x2 patches of 16-channel latents, whose modulation comes from the timestep
alone (no pooled CLIP, no guidance input); flow matching with Flux.1-dev's
resolution-dependent shift; true CFG with a negative prompt.

Mirrors `ChromaPipeline.__call__` (diffusers 0.42), and for img2img and inpaint
`ChromaImg2ImgPipeline` and `ChromaInpaintPipeline`. Everything but the prompt and the
transformer call is Flux.1's (the same latents, schedule, packing, VAE calls and inpaint
blending), so `ChromaFamily` is `FluxFamily` with its own `encode`, `uses_cfg` and
`predict`; the loop keeps the latents unpacked, as for Flux.1.

The prompt and the negative prompt are each T5's sequence with the attention mask the stock
pipeline makes of the tokenizer's (every token up to and including the first padding one),
extended by ones over the image tokens; the masks are in the conditioning, so a checkpoint
carries them. What `GenerationParams` means here: `cfg` is classifier-free guidance, used
above 1 as the stock pipeline does (two transformer calls per step: the prompt's, then the
negative prompt's, "" by default); the sampler is "Euler". The prompt is given to T5 as
written, unchunked (512 tokens); A1111's weights and BREAK are dropped from it
(`flow.sentence_prompt`).

Two details differ between the stock pipelines and are followed: text to image and inpaint
cast the timestep to the latents' dtype before dividing it by 1000, img2img does not (only
a half dtype sees the difference); and the inpaint pipeline reads 256 T5 tokens by default,
the others 512 (the mask is added to the attention scores, not a boolean one, so the
padding's length shows in every image).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.chroma import CHROMA
from app.engine.generation.families.flow import sentence_prompt
from app.engine.generation.families.flux.model import (
    LATENT_IMAGE_IDS,
    MAX_SEQUENCE_LENGTH,
    PROMPT_EMBEDS,
    TEXT_IDS,
    FluxFamily,
    _unpacked,
)
from app.engine.generation.loop import inpaint
from app.engine.jobs.params import GenerationParams

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide
    from app.engine.generation.loop.inpaint import MaskedImage

INPAINT_SEQUENCE_LENGTH = 256  # `ChromaInpaintPipeline.__call__`'s default (the others 512)
ATTENTION_MASK = "attention_mask"  # the prompt's tokens read, then every image token
NEGATIVE_EMBEDS = "negative_prompt_embeds"  # T5's sequence of the negative prompt (CFG only)
NEGATIVE_MASK = "negative_attention_mask"


class ChromaFamily(FluxFamily):
    """`ChromaPipeline`'s models."""

    name = CHROMA.checkpoint_family  # as declared: what its checkpoints say
    label = CHROMA.checkpoint_label
    checkpoint_tensors: tuple[str, ...] = (
        PROMPT_EMBEDS, ATTENTION_MASK, TEXT_IDS, LATENT_IMAGE_IDS,
    )  # fmt: skip
    # Whether the timestep is cast to the latents' dtype (text to image and inpaint), as
    # each stock pipeline does; set with the job's schedule (`initial_latents`,
    # `resumed_schedule`), before the first `predict`.
    _cast_timestep = True

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        needs = self.checkpoint_tensors
        if self.uses_cfg(params):
            needs = (*needs, NEGATIVE_EMBEDS, NEGATIVE_MASK)
        if params.is_inpaint:
            needs = (*needs, inpaint.MASK, inpaint.IMAGE_LATENTS, inpaint.NOISE)
        return needs

    def uses_cfg(self, params: GenerationParams) -> bool:
        return params.cfg > 1  # the stock pipeline's `do_classifier_free_guidance`

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        """The stock `encode_prompt` (T5 with its mask; the negative prompt's too, with CFG),
        then each mask extended over the image tokens as `_prepare_attention_mask` does."""
        _, _, height, width = self.latent_shape(params)
        image_tokens = (height // 2) * (width // 2)
        embeds, text_ids, mask, negative, _, negative_mask = self.pipe.encode_prompt(
            prompt=sentence_prompt(params.prompt),
            negative_prompt=sentence_prompt(params.negative_prompt),
            device=self.device,
            num_images_per_prompt=1,
            do_classifier_free_guidance=do_cfg,
            max_sequence_length=(
                INPAINT_SEQUENCE_LENGTH if params.is_inpaint else MAX_SEQUENCE_LENGTH
            ),
            lora_scale=None,
        )
        embeds = self.for_transformer(embeds)  # T5's; the latents take its dtype
        conditioning = {
            PROMPT_EMBEDS: embeds,
            ATTENTION_MASK: self._with_image_tokens(mask, image_tokens, embeds.dtype),
            TEXT_IDS: text_ids,  # zeros; the negative prompt's are the same
            LATENT_IMAGE_IDS: self.pipe._prepare_latent_image_ids(
                1, height // 2, width // 2, self.device, embeds.dtype
            ),
        }
        if do_cfg:
            conditioning[NEGATIVE_EMBEDS] = self.for_transformer(negative)
            conditioning[NEGATIVE_MASK] = self._with_image_tokens(
                negative_mask, image_tokens, embeds.dtype
            )
        return conditioning

    @staticmethod
    def _with_image_tokens(mask: torch.Tensor, tokens: int, dtype: torch.dtype) -> torch.Tensor:
        """`_prepare_attention_mask`: ones appended for the image tokens, in the latents'
        dtype (0 and 1 are exact in every dtype, so the pipelines' two ways agree)."""
        ones = torch.ones(mask.shape[0], tokens, device=mask.device, dtype=dtype)
        return torch.cat([mask.to(dtype), ones], dim=1)

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
    ) -> Schedule:
        self._cast_timestep = masked is not None or init_image is None
        return super().initial_latents(
            scheduler, params, generator, init_image, conditioning, masked
        )

    def resumed_schedule(self, scheduler: Any, params: GenerationParams) -> tuple[Any, int]:
        self._cast_timestep = params.is_inpaint or not params.init_image
        return super().resumed_schedule(scheduler, params)

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
        timestep = t.expand(packed.shape[0])
        if self._cast_timestep:
            timestep = timestep.to(packed.dtype)

        def transformer(embeds: str, mask: str) -> torch.Tensor:
            output: torch.Tensor = pipe.transformer(
                hidden_states=packed,
                timestep=timestep / 1000,
                encoder_hidden_states=conditioning[embeds],
                txt_ids=conditioning[TEXT_IDS],
                img_ids=conditioning[LATENT_IMAGE_IDS],
                attention_mask=conditioning[mask],
                joint_attention_kwargs={},
                return_dict=False,
            )[0]
            return output

        noise_pred = transformer(PROMPT_EMBEDS, ATTENTION_MASK)
        if do_cfg:
            negative = transformer(NEGATIVE_EMBEDS, NEGATIVE_MASK)
            noise_pred = negative + guidance * (noise_pred - negative)
        return _unpacked(noise_pred, height, width)
