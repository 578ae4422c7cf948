"""Loading Stable Diffusion 1.x/2.x and SDXL pipelines offline, and keeping the last one(s)
in memory.

A diffusers folder loads with `from_pretrained`; a single checkpoint file with diffusers'
`from_single_file`, given the matching config folder shipped in `resources/model_configs`
(model_index.json, component configs, tokenizers), so nothing is ever fetched from a hub.
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from app.engine.generation.architecture import INPAINT_CHANNELS, Architecture, Prediction
from app.engine.generation.device import DeviceChoice
from app.engine.generation.errors import ModelLoadFailed, UnsupportedModel, is_transient
from app.engine.generation.load_failure import load_failure
from app.engine.generation.lora import (
    LoraError,
    LoraRef,
    ResolvedLora,
    lora_folders,
    resolve_loras,
)
from app.engine.generation.preview import Previewer, previewer_for
from app.engine.generation.sources import MODEL_INDEX, ModelInfo, detected
from app.engine.paths import resources_dir
from app.errors import EaselError

log = logging.getLogger(__name__)

REQUIRED_COMPONENTS = ("unet", "vae", "text_encoder", "tokenizer", "scheduler")

CacheKey = tuple[str, str, str, bool]


@dataclass(frozen=True)
class SingleFileConfigs:
    """Which config folder a single checkpoint file of each kind is loaded with."""

    root: Path

    def folder(self, architecture: Architecture, prediction: Prediction) -> Path:
        name = architecture.value
        if architecture is Architecture.SD2:
            name += "-v" if prediction is Prediction.V else "-base"
        return self.root / name


def bundled_configs() -> SingleFileConfigs:
    return SingleFileConfigs(resources_dir() / "model_configs")


SHARED_VOCABULARY = "clip-vocabulary"  # see packaging/model_configs/make_model_configs.py
TOKENIZERS = ("tokenizer", "tokenizer_2")


def shipped_tokenizer(folder: Path) -> Any:
    """A CLIP tokenizer from a shipped settings folder and the one shared vocabulary
    (`<configs>/clip-vocabulary`): the six tokenizers differ only in their padding token."""
    from transformers import CLIPTokenizer

    shared = folder.parent.parent / SHARED_VOCABULARY
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    vocab = json.loads((shared / "vocab.json").read_text(encoding="utf-8"))
    lines = (shared / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]
    merges: Any = [tuple(line.split()) for line in lines if line]
    return CLIPTokenizer(
        vocab=vocab,
        merges=merges,
        pad_token=settings["pad_token"],
        model_max_length=settings["model_max_length"],
    )


def _tokenizers_from_shared_vocabulary(config: Path) -> dict[str, Any]:
    """Tokenizers for a shipped config folder; a full tokenizer folder loads as it is."""
    return {
        name: shipped_tokenizer(config / name)
        for name in TOKENIZERS
        if (config / name).is_dir() and not _has_own_vocabulary(config / name)
    }


def _has_own_vocabulary(folder: Path) -> bool:
    return (folder / "vocab.json").exists() or (folder / "tokenizer.json").exists()


@dataclass
class LoadedModel:
    model: ModelInfo
    device: DeviceChoice
    pipe: Any  # StableDiffusionPipeline or StableDiffusionXLPipeline
    previewer: Previewer
    loras: tuple[ResolvedLora, ...] = ()  # what is applied to `pipe` right now

    def use_loras(self, loras: Sequence[ResolvedLora]) -> None:
        """Apply exactly `loras` (none: the plain model), whatever the last job applied."""
        wanted = tuple(loras)
        if wanted == self.loras:
            return
        if [lora.path for lora in wanted] != [lora.path for lora in self.loras]:
            self._unload_loras()
            for index, lora in enumerate(wanted):
                self._load_lora(index, lora)
        if wanted:
            names = [_adapter_name(index) for index in range(len(wanted))]
            self.pipe.set_adapters(names, adapter_weights=[lora.weight for lora in wanted])
        self.loras = wanted

    def _unload_loras(self) -> None:
        if self.loras:
            self.pipe.unload_lora_weights()  # removes the LoRA layers: the model as loaded
            self.loras = ()

    def _load_lora(self, index: int, lora: ResolvedLora) -> None:
        try:
            self.pipe.load_lora_weights(str(lora.path), adapter_name=_adapter_name(index))
        except (ValueError, KeyError, RuntimeError, OSError) as error:
            self.pipe.unload_lora_weights()
            self.loras = ()
            label = self.model.label
            raise LoraError(
                f"LoRA {lora.name!r} ({lora.path.name}) does not fit model {self.model.name!r} "
                f"({label}); is it made for another architecture? ({error})"
            ) from error


def _adapter_name(index: int) -> str:
    return f"lora{index}"  # peft adapter names become module keys: no dots or spaces


def load_pipeline(
    model: ModelInfo, device: DeviceChoice, configs: SingleFileConfigs | None = None
) -> LoadedModel:
    """Load `model` from disk only (never the network), without the safety checker."""
    model = detected(model)
    if not model.supported or model.architecture is None:
        raise UnsupportedModel(f"model {model.name!r} cannot be used: {model.unsupported_reason}")
    _quiet_loading()
    pipeline_class = _pipeline_class(model.architecture)
    options: dict[str, Any] = {"local_files_only": True, "dtype": device.torch_dtype}
    if model.architecture is Architecture.SDXL:
        options["add_watermarker"] = False  # an invisible watermark alters pixels; not ours to add
    else:
        options.update(safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    if model.is_single_file:
        config = (configs or bundled_configs()).folder(model.architecture, model.prediction)
        _check_configs(model, config)
        load = partial(_from_single_file, pipeline_class, model, config, options)
    else:
        _check_layout(model)
        options["low_cpu_mem_usage"] = True
        load = partial(pipeline_class.from_pretrained, model.path, **options)
    with _failure_in_one_sentence(model):
        pipe = load()
        _place(pipe, device)
    pipe.set_progress_bar_config(disable=True)  # progress goes through on_step instead
    return LoadedModel(model, device, pipe, previewer_for(pipe))


def _place(pipe: Any, device: DeviceChoice) -> None:
    if not device.low_vram:
        pipe.to(device.device)
        return
    if device.device != "cpu":
        # accelerate hooks move each component to the GPU only while it runs.
        pipe.enable_model_cpu_offload(device=device.device)
    # Tiles only above the VAE's tile size (its native image size): small images unchanged.
    pipe.vae.enable_tiling()


def _quiet_loading() -> None:
    # Loading bars and import-time advisories on a worker's stderr mean nothing to an
    # artist; the app reports progress itself, and real problems arrive as exceptions.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from diffusers.utils import logging as diffusers_logging
    from transformers.utils import logging as transformers_logging

    diffusers_logging.disable_progress_bar()
    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()


def _pipeline_class(architecture: Architecture) -> Any:
    from diffusers import StableDiffusionPipeline, StableDiffusionXLPipeline

    if architecture is Architecture.SDXL:
        return StableDiffusionXLPipeline
    return StableDiffusionPipeline


@contextmanager
def _failure_in_one_sentence(model: ModelInfo) -> Iterator[None]:
    """What the loaders raise for a model they cannot build (a fine-tune with an odd
    layout, a file damaged after it was listed) becomes `ModelLoadFailed`: one sentence
    for the job's error; their own text, with its traceback, goes to the log."""
    from diffusers.loaders.single_file_utils import SingleFileComponentError
    from safetensors import SafetensorError

    try:
        yield
    except (
        OSError, ValueError, KeyError, RuntimeError, SingleFileComponentError, SafetensorError,
    ) as error:  # fmt: skip
        if isinstance(error, EaselError) or is_transient(error):
            # Already one sentence; or worth a retry as it is (GPU memory: the runner's
            # low-VRAM retry; host memory: the retry policy's), not a fault of the file.
            raise
        log.warning("model %r (%s) did not load", model.name, model.path, exc_info=True)
        raise ModelLoadFailed(load_failure(model, error)) from error


def _check_configs(model: ModelInfo, config: Path) -> None:
    if not (config / MODEL_INDEX).is_file():
        raise UnsupportedModel(
            f"model {model.name!r}: the {model.label} config files are missing from {config} "
            "(a damaged installation?)"
        )


def _from_single_file(
    pipeline_class: Any, model: ModelInfo, config: Path, options: dict[str, Any]
) -> Any:
    options = {**options, **_tokenizers_from_shared_vocabulary(config)}
    if model.inpainting:
        options["unet"] = _inpainting_unet(model, config, options["dtype"])
    return pipeline_class.from_single_file(str(model.path), config=str(config), **options)


def _inpainting_unet(model: ModelInfo, config: Path, dtype: Any) -> Any:
    """An inpainting checkpoint's UNet: the shipped config takes 4 channels, its weights 9."""
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel.from_single_file(
        str(model.path), config=str(config), subfolder="unet", in_channels=INPAINT_CHANNELS,
        torch_dtype=dtype, local_files_only=True,
    )  # fmt: skip


class PipelineCache:
    """Loaded pipelines keyed by (model path, device, dtype); the least recently used goes first.

    One model by default: a second SD model in memory would double the RAM/VRAM in use.
    """

    def __init__(
        self,
        max_models: int = 1,
        configs: SingleFileConfigs | None = None,
        lora_folders: Sequence[Path] | None = None,
    ) -> None:
        self._max_models = max(1, max_models)
        self._configs = configs
        self._lora_folders = lora_folders
        self._loaded: OrderedDict[CacheKey, LoadedModel] = OrderedDict()

    def get(
        self, model: ModelInfo, device: DeviceChoice, loras: Sequence[LoraRef] = ()
    ) -> LoadedModel:
        """The pipeline for `model` with exactly `loras` applied: a LoRA of the previous job
        is removed first, so it can never leak into this one."""
        # Resolved first: an unknown LoRA name fails before a slow model load.
        resolved = resolve_loras(loras, self._lora_search()) if loras else []
        loaded = self._pipeline(model, device)
        loaded.use_loras(resolved)
        return loaded

    def _lora_search(self) -> Sequence[Path]:
        return lora_folders() if self._lora_folders is None else self._lora_folders

    def _pipeline(self, model: ModelInfo, device: DeviceChoice) -> LoadedModel:
        key = (str(model.path.resolve()), device.device, device.dtype_name, device.low_vram)
        if key in self._loaded:
            self._loaded.move_to_end(key)
            return self._loaded[key]
        while len(self._loaded) >= self._max_models:
            self._loaded.popitem(last=False)  # free before loading, not after
        loaded = load_pipeline(model, device, self._configs)
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
