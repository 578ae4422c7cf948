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

Edit Plus reads up to three input images the same way, in order: the edited picture first
(the job's init image), then the job's further ones (`GenerationParams.edit_images`); each
one's tokens follow the last one's, each with its own patch grid.

The input images' latents (unpacked: their shape is their grid) and the encoded prompts are
the conditioning, so a checkpoint carries them and a resumed job reads exactly the images it
started from. The processor is built as `processor.py` says where transformers cannot load
it (no torchvision)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit, pipeline_qwenimage_edit_plus

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import sentence_prompt
from app.engine.generation.families.flow_params import edit_images_refusal
from app.engine.generation.families.qwen import (
    QWEN_EDIT_ONLY,
    QWEN_IMAGE_EDIT,
    QWEN_IMAGE_EDIT_PLUS,
)
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


def input_latents_key(index: int) -> str:
    """The conditioning name of input image `index`'s latents (the edited picture's is
    `INPUT_LATENTS`, a further one's numbered after it: Edit Plus reads several)."""
    return INPUT_LATENTS if index == 0 else f"{INPUT_LATENTS}_{index}"


@dataclass(frozen=True)
class InputImage:
    """An input image as the stock pipeline reads it: what Qwen2.5-VL sees beside the
    instruction and the VAE's pixels, [-1, 1]."""

    for_text: Any
    pixels: torch.Tensor


class QwenImageEditFamily(QwenImageFamily):
    """`QwenImageEditPipeline`'s models."""

    name = QWEN_IMAGE_EDIT.checkpoint_family
    label = QWEN_IMAGE_EDIT.checkpoint_label
    max_input_images = QWEN_IMAGE_EDIT.requests.edit_images

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        images = max(1, params.edit_image_count)
        return (*super().checkpoint_needs(params), *map(input_latents_key, range(images)))

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        """Nothing yet: the instruction is encoded with the input images (`encode_edit`)."""
        return {}

    def encode_edit(
        self, params: GenerationParams, images: Sequence[bytes], do_cfg: bool
    ) -> Conditioning:
        """The stock `__call__`'s steps 3 and 4 up to the noise: each input image read
        (`read_input`), the instruction (and the negative prompt) encoded with what
        Qwen2.5-VL sees of them, each image encoded by the VAE. Nothing random is drawn."""
        if len(images) > self.max_input_images:  # submit refuses them first
            given = len(images)
            raise InvalidParameters(edit_images_refusal(self.label, self.max_input_images, given))
        reads = [self.read_input(open_rgb(png)) for png in images]
        for_text = self.text_images(reads)
        conditioning = {PROMPT_EMBEDS: self._edit_encoded(params.prompt, for_text)}
        if do_cfg:
            negative = params.negative_prompt
            conditioning[NEGATIVE_EMBEDS] = self._edit_encoded(negative, for_text)
        dtype = conditioning[PROMPT_EMBEDS].dtype
        for index, read in enumerate(reads):
            conditioning[input_latents_key(index)] = self._input_latents(read.pixels, dtype)
        return conditioning

    def text_images(self, reads: Sequence[InputImage]) -> Any:
        """What `encode_prompt` is handed as `image`: the one picture."""
        return reads[0].for_text

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
    ) -> Schedule:
        edited = INPUT_LATENTS in conditioning  # `encode_edit` ran: an edit with its image
        if params.kind != KIND_EDIT or init_image is None or masked is not None or not edited:
            raise InvalidParameters(QWEN_EDIT_ONLY)  # submit refuses it first
        return super().initial_latents(scheduler, params, generator, None, conditioning)

    def read_input(self, image: Image.Image) -> InputImage:
        """The stock `__call__`'s step 3: the image resized to about 1 megapixel at its
        aspect ratio; that is what Qwen2.5-VL sees, and preprocessed what the VAE encodes."""
        width, height, _ = pipeline_qwenimage_edit.calculate_dimensions(
            INPUT_AREA, image.size[0] / image.size[1]
        )
        processor = self.pipe.image_processor
        resized = processor.resize(image, height, width)
        return InputImage(resized, processor.preprocess(resized, height, width))

    def _edit_encoded(self, prompt: str, image: Any) -> torch.Tensor:
        """`encode_prompt` of one text with the input image(s): its hidden states without
        the template's head (one text is never padded: no mask)."""
        embeds, mask = self.pipe.encode_prompt(
            prompt=sentence_prompt(prompt),
            image=image,
            device=self.device,
            max_sequence_length=MAX_SEQUENCE_LENGTH,
        )
        if mask is not None:
            raise AssertionError("a single prompt came back padded")
        return self.for_transformer(embeds)

    def _input_latents(self, pixels: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The stock `prepare_latents`' image: one frame, encoded to its mode and normalised
        (`_encode_vae_image`; the mode draws nothing, so no generator), the frame axis
        dropped."""

        def mode(frame: torch.Tensor) -> torch.Tensor:
            latents: torch.Tensor = self.pipe._encode_vae_image(frame, None)
            return latents

        frame = pixels.unsqueeze(2).to(device=self.device, dtype=dtype)
        return vae_precision.run_encoder(self.pipe.vae, frame, False, mode)[:, :, 0]

    def extra_tokens(
        self, conditioning: Conditioning
    ) -> tuple[torch.Tensor, list[tuple[int, int, int]]] | None:
        """Each input image's packed latents, in order, after the latents' own (as the
        stock `prepare_latents` concatenates them), and each one's patch grid."""
        tokens, grids = [], []
        index = 0
        while (key := input_latents_key(index)) in conditioning:
            latents = conditioning[key]
            batch, channels, height, width = latents.shape
            tokens.append(self.pipe._pack_latents(latents, batch, channels, height, width))
            grids.append((1, height // 2, width // 2))
            index += 1
        return torch.cat(tokens, dim=1), grids


class QwenImageEditPlusFamily(QwenImageEditFamily):
    """`QwenImageEditPlusPipeline`'s models (Qwen-Image-Edit-2509 and later), with one to
    `MAX_EDIT_IMAGES` input images: Qwen2.5-VL sees each at about 384x384
    (`CONDITION_IMAGE_SIZE`) as "Picture 1", "Picture 2", ... of the template, the VAE
    encodes each at about 1 megapixel (`VAE_IMAGE_SIZE`) preprocessed from the picture
    itself; the rest is Qwen-Image-Edit's."""

    name = QWEN_IMAGE_EDIT_PLUS.checkpoint_family
    label = QWEN_IMAGE_EDIT_PLUS.checkpoint_label
    max_input_images = QWEN_IMAGE_EDIT_PLUS.requests.edit_images

    def read_input(self, image: Image.Image) -> InputImage:
        plus = pipeline_qwenimage_edit_plus  # its sizes and function, read where it reads them
        ratio = image.size[0] / image.size[1]
        text_width, text_height = plus.calculate_dimensions(plus.CONDITION_IMAGE_SIZE, ratio)
        vae_width, vae_height = plus.calculate_dimensions(plus.VAE_IMAGE_SIZE, ratio)
        processor = self.pipe.image_processor
        for_text = processor.resize(image, text_height, text_width)
        return InputImage(for_text, processor.preprocess(image, vae_height, vae_width))

    def text_images(self, reads: Sequence[InputImage]) -> Any:
        """A list, one picture each, as the stock `__call__` hands `encode_prompt`."""
        return [read.for_text for read in reads]
