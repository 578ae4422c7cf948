"""SD 1.x and 2.x (epsilon or v-prediction): one CLIP text encoder, a UNet, a VAE."""

from __future__ import annotations

import torch
from PIL import Image

from app.engine.generation.families.base import Conditioning
from app.engine.generation.families.sd import SD1
from app.engine.generation.families.unet import PROMPT_EMBEDS, UNetFamily
from app.engine.generation.prompts.loras import prompt_text
from app.engine.generation.prompts.weights import (
    ClipEncoders,
    encode_weighted,
    needs_a1111_encoding,
)
from app.engine.jobs.params import GenerationParams


class StableDiffusionFamily(UNetFamily):
    """`StableDiffusionPipeline`'s models; SD 2.x differs only in its configs."""

    name = SD1.checkpoint_family  # as declared: what its checkpoints say
    label = SD1.checkpoint_label
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS,)

    def encode_prompt(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        pipe = self.pipe
        prompt = prompt_text(params.prompt)  # without its <lora:...> tags, as A1111 does
        negative = params.negative_prompt
        if any(needs_a1111_encoding(text, pipe.tokenizer) for text in (prompt, negative)):
            cond, uncond, _, _ = encode_weighted(self.clip_encoders(), prompt, negative, do_cfg)
        else:
            cond, uncond = pipe.encode_prompt(prompt, pipe._execution_device, 1, do_cfg, negative)
        return {PROMPT_EMBEDS: torch.cat([uncond, cond]) if do_cfg else cond}

    def clip_encoders(self) -> ClipEncoders:
        pipe = self.pipe
        pairs = ((pipe.tokenizer, pipe.text_encoder),)
        return ClipEncoders(pairs, pipe._execution_device, pipe.text_encoder.dtype)

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image:
        pipe = self.pipe
        image = self.decoded_pixels(latents, generator)  # the generator, as the pipeline's
        pil: Image.Image = pipe.image_processor.postprocess(
            image, output_type="pil", do_denormalize=[True]
        )[0]
        return pil
