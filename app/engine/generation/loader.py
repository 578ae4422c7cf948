"""Loading Stable Diffusion pipelines offline, and keeping the last one(s) in memory."""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.generation.device import DeviceChoice
from app.engine.generation.errors import UnsupportedModel
from app.engine.generation.preview import Previewer, previewer_for
from app.engine.generation.sources import MODEL_INDEX, ModelInfo

REQUIRED_COMPONENTS = ("unet", "vae", "text_encoder", "tokenizer", "scheduler")

CacheKey = tuple[str, str, str]


@dataclass
class LoadedModel:
    model: ModelInfo
    device: DeviceChoice
    pipe: Any  # StableDiffusionPipeline
    previewer: Previewer


def load_pipeline(model: ModelInfo, device: DeviceChoice) -> LoadedModel:
    """Load `model` from disk only (never the network), without the safety checker."""
    _check_layout(model)
    # Loading bars and import-time advisories on a worker's stderr mean nothing to an
    # artist; the app reports progress itself, and real problems arrive as exceptions.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from diffusers import StableDiffusionPipeline
    from diffusers.utils import logging as diffusers_logging
    from transformers.utils import logging as transformers_logging

    diffusers_logging.disable_progress_bar()
    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()

    pipe = StableDiffusionPipeline.from_pretrained(
        model.path,
        local_files_only=True,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
        dtype=device.torch_dtype,
    )
    pipe = pipe.to(device.device)
    pipe.set_progress_bar_config(disable=True)  # progress goes through on_step instead
    return LoadedModel(model, device, pipe, previewer_for(pipe))


class PipelineCache:
    """Loaded pipelines keyed by (model path, device, dtype); the least recently used goes first.

    One model by default: a second SD model in memory would double the RAM/VRAM in use.
    """

    def __init__(self, max_models: int = 1) -> None:
        self._max_models = max(1, max_models)
        self._loaded: OrderedDict[CacheKey, LoadedModel] = OrderedDict()

    def get(self, model: ModelInfo, device: DeviceChoice) -> LoadedModel:
        key = (str(model.path.resolve()), device.device, device.dtype_name)
        if key in self._loaded:
            self._loaded.move_to_end(key)
            return self._loaded[key]
        while len(self._loaded) >= self._max_models:
            self._loaded.popitem(last=False)  # free before loading, not after
        loaded = load_pipeline(model, device)
        self._loaded[key] = loaded
        return loaded

    def clear(self) -> None:
        self._loaded.clear()


def _check_layout(model: ModelInfo) -> None:
    index_path = Path(model.path) / MODEL_INDEX
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UnsupportedModel(
            f"model {model.name!r}: cannot read {index_path}: {error}"
        ) from error
    missing = [
        name for name in REQUIRED_COMPONENTS if not isinstance(index, dict) or name not in index
    ]
    if missing:
        raise UnsupportedModel(
            f"model {model.name!r} ({model.pipeline_class or 'unknown pipeline'}) is not a "
            f"Stable Diffusion pipeline: missing {', '.join(missing)} in {index_path}"
        )
