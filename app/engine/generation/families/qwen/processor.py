"""Qwen-Image-Edit's `processor` (a `Qwen2VLProcessor`: the Qwen2.5-VL image processor and
tokenizer that write an input image into the instruction's tokens) where transformers
cannot load it whole.

transformers 5 builds a `Qwen2VLProcessor` with a video processor, and its video processors
need torchvision: without it `Qwen2VLProcessor.from_pretrained` fails, and so does its
constructor given `video_processor=None` (processing_utils' class check looks
`VideoProcessorMixin` up and finds nothing). Editing one picture never reads the video
processor, so without torchvision Easel builds the processor of the folder's own image
processor config, on its PIL backend (`Qwen2VLImageProcessorPil`, which transformers 5
falls back to itself for other models), and its tokenizer, with no video processor at all.
With torchvision the folder loads as diffusers loads it, so both take the same path as the
stock pipeline there. Its users here construct it the same way (`image_only_processor`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import AutoTokenizer, Qwen2VLProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.utils import is_torchvision_available

PROCESSOR = "processor"  # the folder's part (model_index.json) holding both configs


class ImageOnlyQwen2VLProcessor(Qwen2VLProcessor):
    """A `Qwen2VLProcessor` without the video processor: `ProcessorMixin` takes its parts
    from `__init__`'s parameters, so leaving `video_processor` out there is what makes it
    constructible; it processes text and images exactly as its parent."""

    def __init__(
        self,
        image_processor: Any = None,
        tokenizer: Any = None,
        chat_template: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


def image_only_processor(processor_folder: Path) -> ImageOnlyQwen2VLProcessor:
    """The processor of a folder's `processor/` part, its image processor on PIL."""
    return ImageOnlyQwen2VLProcessor(
        image_processor=Qwen2VLImageProcessorPil.from_pretrained(
            processor_folder, local_files_only=True
        ),
        tokenizer=AutoTokenizer.from_pretrained(processor_folder, local_files_only=True),
    )


def edit_components(folder: Path) -> dict[str, Any]:
    """What `from_pretrained` must be handed for a Qwen-Image-Edit folder: its processor
    where transformers cannot load it (no torchvision); nothing otherwise."""
    if is_torchvision_available():
        return {}
    return {PROCESSOR: image_only_processor(folder / PROCESSOR)}
