"""Qwen-Image-Edit: Qwen-Image's transformer reading an input image's latents as tokens after
its own (their output dropped), and the instruction encoded by Qwen2.5-VL together with the
image.

Mirrors `QwenImageEditPipeline.__call__` (diffusers 0.42) called with the job's size as
`height` and `width`, its `true_cfg_scale` the job's `cfg` and its `negative_prompt` the
job's (Qwen-Image's meaning of `cfg`: `model.py`):
- the input image is resized to about 1 megapixel at its aspect ratio (`calculate_dimensions`
  of 1024 * 1024, sides in multiples of 32), read where the stock pipeline reads it (a test
  shrinks both at once);
- that resized image is what Qwen2.5-VL sees beside the instruction (the processor writes
  its vision tokens into the template: `encode_prompt` with the image), for the prompt and
  the negative prompt alike;
- it is preprocessed and encoded to the mode of the VAE's distribution (nothing random is
  drawn), normalised per channel, then the noise is drawn as Qwen-Image's;
- each step the transformer reads the latents' tokens then the image's, with both patch
  grids as `img_shapes`, and its output for the image's tokens is dropped before CFG.

The input image's latents (unpacked: their shape is their grid) and the encoded prompts are
the conditioning, so a checkpoint carries them and a resumed job reads exactly the image it
started from. The processor is built as `processor.py` says where transformers cannot load
it (no torchvision)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import sentence_prompt
from app.engine.generation.families.qwen import QWEN_EDIT_ONLY, QWEN_IMAGE_EDIT
from app.engine.generation.families.qwen.model import (
    MAX_SEQUENCE_LENGTH,
    NEGATIVE_EMBEDS,
    PROMPT_EMBEDS,
    QwenImageFamily,
)
from app.engine.generation.loop import vae_precision
from app.engine.jobs.init_image import open_rgb
from app.engine.jobs.params import KIND_EDIT, GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from PIL import Image

    from app.engine.generation.loop.inpaint import MaskedImage

INPUT_LATENTS = "input_image_latents"  # the input image's latents, (1, 16, h/8, w/8)
INPUT_AREA = 1024 * 1024  # the stock `__call__`'s target area for the input image


class QwenImageEditFamily(QwenImageFamily):
    """`QwenImageEditPipeline`'s models."""

    name = QWEN_IMAGE_EDIT.checkpoint_family
    label = QWEN_IMAGE_EDIT.checkpoint_label

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        return (*super().checkpoint_needs(params), INPUT_LATENTS)

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        """Nothing yet: the instruction is encoded with the input image (`initial_latents`)."""
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
        if params.kind != KIND_EDIT or init_image is None or masked is not None:
            raise InvalidParameters(QWEN_EDIT_ONLY)  # submit refuses it first
        image = open_rgb(init_image)
        width, height, _ = pipeline_qwenimage_edit.calculate_dimensions(
            INPUT_AREA, image.size[0] / image.size[1]
        )
        prompt_image = self.pipe.image_processor.resize(image, height, width)
        conditioning[PROMPT_EMBEDS] = self._edit_encoded(params.prompt, prompt_image)
        if self.uses_cfg(params):
            conditioning[NEGATIVE_EMBEDS] = self._edit_encoded(params.negative_prompt, prompt_image)
        conditioning[INPUT_LATENTS] = self._input_latents(
            prompt_image, height, width, generator, conditioning[PROMPT_EMBEDS].dtype
        )
        return super().initial_latents(scheduler, params, generator, None, conditioning)

    def _edit_encoded(self, prompt: str, image: Image.Image) -> torch.Tensor:
        """`encode_prompt` of one text with the input image: its hidden states without the
        template's head (one text is never padded: no mask)."""
        embeds, mask = self.pipe.encode_prompt(
            prompt=sentence_prompt(prompt),
            image=image,
            device=self.device,
            max_sequence_length=MAX_SEQUENCE_LENGTH,
        )
        if mask is not None:
            raise AssertionError("a single prompt came back padded")
        return self.for_transformer(embeds)

    def _input_latents(
        self,
        image: Image.Image,
        height: int,
        width: int,
        generator: torch.Generator,
        dtype: torch.dtype,
    ) -> torch.Tensor:
        """The stock `prepare_latents`' image: preprocessed at the input size, one frame,
        encoded to its mode and normalised (`_encode_vae_image`), the frame axis dropped."""
        pixels = self.pipe.image_processor.preprocess(image, height, width).unsqueeze(2)

        def mode(frame: torch.Tensor) -> torch.Tensor:
            latents: torch.Tensor = self.pipe._encode_vae_image(frame, generator)
            return latents

        pixels = pixels.to(device=self.device, dtype=dtype)
        return vae_precision.run_encoder(self.pipe.vae, pixels, False, mode)[:, :, 0]

    def extra_tokens(
        self, conditioning: Conditioning
    ) -> tuple[torch.Tensor, tuple[int, int, int]] | None:
        latents = conditioning[INPUT_LATENTS]
        batch, channels, height, width = latents.shape
        packed = self.pipe._pack_latents(latents, batch, channels, height, width)
        return packed, (1, height // 2, width // 2)
