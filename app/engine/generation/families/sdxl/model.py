"""SDXL: two CLIP text encoders, whose second adds a pooled embedding, and six "time ids"
(original size, crop corner, target size) as extra UNet conditioning. Both are part of
the conditioning a checkpoint carries."""

from __future__ import annotations

from typing import Any

import torch
from PIL import Image

from app.engine.generation.families.base import Conditioning
from app.engine.generation.families.sdxl import SDXL
from app.engine.generation.families.unet import PROMPT_EMBEDS, UNetFamily
from app.engine.generation.prompts.loras import prompt_text
from app.engine.generation.prompts.weights import (
    ClipEncoders,
    encode_weighted,
    needs_a1111_encoding,
)
from app.engine.jobs.params import GenerationParams

POOLED_EMBEDS = "pooled_embeds"
ADD_TIME_IDS = "add_time_ids"


class StableDiffusionXLFamily(UNetFamily):
    """`StableDiffusionXLPipeline`'s models."""

    name = SDXL.checkpoint_family  # as declared: what its checkpoints say
    label = SDXL.checkpoint_label
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS, POOLED_EMBEDS, ADD_TIME_IDS)
    # SDXL's VAE overflows to NaN (a black image) in float16; its config asks for float32.
    follows_force_upcast = True

    def scheduler(self, params: GenerationParams) -> Any:
        scheduler = super().scheduler(params)
        if hasattr(scheduler, "set_begin_index"):
            scheduler.set_begin_index(0)  # as StableDiffusionXLPipeline does before its loop
        return scheduler

    def encode_prompt(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        pipe = self.pipe
        device = pipe._execution_device
        prompt = prompt_text(params.prompt)  # without its <lora:...> tags, as A1111 does
        negative = params.negative_prompt
        if any(needs_a1111_encoding(text, pipe.tokenizer) for text in (prompt, negative)):
            cond, uncond, pooled, uncond_pooled = encode_weighted(
                self.clip_encoders(), prompt, negative, do_cfg
            )
        else:
            cond, uncond, pooled, uncond_pooled = pipe.encode_prompt(
                prompt=prompt,
                device=device,
                num_images_per_prompt=1,
                do_classifier_free_guidance=do_cfg,
                negative_prompt=_stock_negative(negative),
            )
        time_ids = self._time_ids(params, cond.dtype)
        if do_cfg:
            cond, pooled = torch.cat([uncond, cond]), torch.cat([uncond_pooled, pooled])
            time_ids = torch.cat([time_ids, time_ids])
        return {
            PROMPT_EMBEDS: cond.to(device),
            POOLED_EMBEDS: pooled.to(device),
            ADD_TIME_IDS: time_ids.to(device),
        }

    def clip_encoders(self) -> ClipEncoders:
        pipe = self.pipe
        # The A1111 path (`encode_weighted`) zeroes an empty negative prompt itself.
        return ClipEncoders(
            pairs=((pipe.tokenizer, pipe.text_encoder), (pipe.tokenizer_2, pipe.text_encoder_2)),
            device=pipe._execution_device,
            dtype=pipe.text_encoder.dtype,
            penultimate_and_pooled=True,
            zeros_for_empty_negative=pipe.config.force_zeros_for_empty_prompt,
        )

    def _time_ids(self, params: GenerationParams, dtype: torch.dtype) -> torch.Tensor:
        size = (params.height, params.width)  # original = target size, no crop: stock default
        projection_dim = self.pipe.text_encoder_2.config.projection_dim
        time_ids: torch.Tensor = self.pipe._get_add_time_ids(
            size, (0, 0), size, dtype=dtype, text_encoder_projection_dim=projection_dim
        )
        return time_ids

    def added_conditioning(self, conditioning: Conditioning) -> dict[str, torch.Tensor] | None:
        return {"text_embeds": conditioning[POOLED_EMBEDS], "time_ids": conditioning[ADD_TIME_IDS]}

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image:
        image = self.decoded_pixels(latents)  # in float32 when the VAE asks (vae_precision)
        pil: Image.Image = self.pipe.image_processor.postprocess(image, output_type="pil")[0]
        return pil


def _stock_negative(negative: str) -> str | None:
    """What to pass `encode_prompt` for the negative prompt: None when it is empty.

    The stock pipeline's default is None, and only None makes it follow the model's
    `force_zeros_for_empty_prompt` (zero embeddings, pooled ones too, as Stability's
    reference sampling); an empty string would be encoded as text whatever the config.
    Without that flag None is encoded as the empty string: the same as passing ""."""
    return negative or None
