"""Loading every family's pipeline offline, and keeping the last one(s) in memory.

A diffusers folder loads with `from_pretrained`; a single checkpoint file with diffusers'
`from_single_file`, given the matching config folder shipped in `resources/model_configs`
(model_index.json, component configs, tokenizers), so nothing is ever fetched from a hub;
a transformer family's single or split files are assembled (assemble.py). Which stock
pipeline class, which options and which config folder: the family's declaration
(files/registry.py), never a branch here.
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Any

from app.engine.generation import experts
from app.engine.generation.device import (
    DEFAULT_COMPONENT,
    DeviceChoice,
    component_dtypes,
    family_precision,
)
from app.engine.generation.errors import ModelLoadFailed, UnsupportedModel, is_transient
from app.engine.generation.files.architecture import INPAINT_CHANNELS, Architecture, Prediction
from app.engine.generation.files.sources import MODEL_INDEX, ModelInfo, detected
from app.engine.generation.load.failure import load_failure
from app.engine.generation.memory import (
    MemoryBudget,
    default_budget,
    pipeline_bytes,
    weight_file_bytes,
)
from app.engine.generation.preview import Previewer, previewer_for
from app.engine.generation.prompts.loras import (
    LoraError,
    LoraRef,
    ResolvedLora,
    lora_folders,
    resolve_loras,
)
from app.engine.paths import resources_dir
from app.errors import EaselError

log = logging.getLogger(__name__)

REQUIRED_COMPONENTS = ("unet", "vae", "text_encoder", "tokenizer", "scheduler")
# The transformer families' folders: a transformer instead of the UNet (their text
# encoders are checked by detection, against each family's declared `Folder.parts`).
REQUIRED_TRANSFORMER_COMPONENTS = ("transformer", "vae", "text_encoder", "tokenizer", "scheduler")

CacheKey = tuple[str, str, str, bool]


@dataclass(frozen=True)
class SingleFileConfigs:
    """Which config folder a single checkpoint file of each kind is loaded with."""

    root: Path

    def folder(self, architecture: Architecture, prediction: Prediction) -> Path:
        file = architecture.spec.checkpoint_file
        if file is None:
            raise UnsupportedModel(f"{architecture.label} has no one-file checkpoints")
        v_folder = file.config_folder_v if prediction is Prediction.V else ""
        return self.root / (v_folder or file.config_folder)


def bundled_configs() -> SingleFileConfigs:
    return SingleFileConfigs(resources_dir() / "model_configs")


SHARED_VOCABULARY = "clip-vocabulary"  # see packaging/model_configs/make_model_configs.py
T5_VOCABULARY = "t5-vocabulary"  # see packaging/model_configs/make_transformer_configs.py
TOKENIZERS = ("tokenizer", "tokenizer_2", "tokenizer_3")


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


def shipped_t5_tokenizer(folder: Path) -> Any:
    """The T5 tokenizer of a shipped settings folder, on the one shared T5 v1.1 vocabulary
    (`<configs>/t5-vocabulary/tokenizer.json`, 32,100 tokens: see its README.txt)."""
    from transformers import T5TokenizerFast  # type: ignore[attr-defined]

    shared = folder.parent.parent / T5_VOCABULARY
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    return T5TokenizerFast(
        tokenizer_file=str(shared / "tokenizer.json"),
        model_max_length=settings["model_max_length"],
        eos_token=settings["eos_token"],
        pad_token=settings["pad_token"],
        unk_token=settings["unk_token"],
        extra_ids=settings.get("extra_ids", 100),
    )


def _tokenizers_from_shared_vocabulary(config: Path) -> dict[str, Any]:
    """Tokenizers for a shipped config folder; a full tokenizer folder loads as it is."""
    return {
        name: _shipped(config / name)
        for name in TOKENIZERS
        if (config / name).is_dir() and not _has_own_vocabulary(config / name)
    }


def _shipped(folder: Path) -> Any:
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    if str(settings.get("tokenizer_class", "")).startswith("T5"):
        return shipped_t5_tokenizer(folder)
    return shipped_tokenizer(folder)


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
        from app.engine.generation.families.unet import forget_prompts

        forget_prompts(self.pipe)  # LoRAs change the text encoders' outputs
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
    model: ModelInfo,
    device: DeviceChoice,
    configs: SingleFileConfigs | None = None,
    device_bytes: int | None = None,
) -> LoadedModel:
    """Load `model` from disk only (never the network), without the safety checker;
    `device_bytes`: what it may take on the device (None: no limit), which decides where a
    pair of experts goes (`experts.place`)."""
    model = detected(model)
    if not model.supported or model.architecture is None:
        raise UnsupportedModel(f"model {model.name!r} cannot be used: {model.unsupported_reason}")
    _quiet_loading()
    pipeline_class = _pipeline_class(model.architecture)
    dtypes = _component_dtypes(model.architecture, device)
    dtype = dtypes[DEFAULT_COMPONENT]
    options: dict[str, Any] = {"local_files_only": True, "dtype": dtype}
    options.update(model.architecture.spec.load_options)  # no watermark, no safety checker
    if model.is_single_file and model.architecture.is_transformer:
        config = (configs or bundled_configs()).root / model.config_name
        _check_configs(model, config)
        load = partial(_assembled, pipeline_class, model, config, options, dtypes)
    elif model.is_single_file:
        config = (configs or bundled_configs()).folder(model.architecture, model.prediction)
        _check_configs(model, config)
        load = partial(_from_single_file, pipeline_class, model, config, options)
    else:
        _check_layout(model)
        options["low_cpu_mem_usage"] = True
        if len(dtypes) > 1:  # a text encoder wider than the rest (device.precision)
            options["dtype"] = dtypes
        options.update(_parts_left_out(model))
        options.update(_folder_components(model))
        load = partial(pipeline_class.from_pretrained, model.path, **options)
    with _failure_in_one_sentence(model):
        pipe = load()
        _place(pipe, device, device_bytes)
    pipe.set_progress_bar_config(disable=True)  # progress goes through on_step instead
    spec = model.architecture.spec
    previewer = previewer_for(pipe, spec.preview, spec.preview_factors)
    return LoadedModel(model, device, pipe, previewer)


def _component_dtypes(architecture: Architecture, device: DeviceChoice) -> dict[str, Any]:
    """Each component's torch dtype (`DEFAULT_COMPONENT`: all the others): one for a UNet
    family; a transformer family's per `device.precision`."""
    import torch

    if not architecture.is_transformer:
        return {DEFAULT_COMPONENT: device.torch_dtype}
    names = component_dtypes(architecture, family_precision(device))
    return {component: getattr(torch, name) for component, name in names.items()}


def _place(pipe: Any, device: DeviceChoice, device_bytes: int | None = None) -> None:
    if not device.low_vram:
        experts.place(pipe, device.device, device_bytes)
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
    import diffusers

    return getattr(diffusers, architecture.spec.pipeline)


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
        file = model.architecture.spec.transformer_file if model.architecture else None
        if file is not None and file.configs_not_shipped:
            raise UnsupportedModel(f"model {model.name!r}: {file.configs_not_shipped}")
        raise UnsupportedModel(
            f"model {model.name!r}: the {model.label} config files are missing from {config} "
            "(a damaged installation?)"
        )


def _from_single_file(
    pipeline_class: Any, model: ModelInfo, config: Path, options: dict[str, Any]
) -> Any:
    from app.engine.generation.load.single_file import fast_single_file

    options = {**options, **_tokenizers_from_shared_vocabulary(config), "config": str(config)}
    if model.inpainting:
        options["unet"] = _inpainting_unet(model, config, options["dtype"])
    return fast_single_file(pipeline_class, Path(model.path), options)


def _assembled(
    pipeline_class: Any,
    model: ModelInfo,
    config: Path,
    options: dict[str, Any],
    dtypes: dict[str, Any],
) -> Any:
    """A Flux / SD 3.x pipeline from its single or split files (assemble.py), each text
    encoder in its own dtype of `dtypes` where it has one."""
    from app.engine.generation.load.assemble import assemble_pipeline

    assert model.architecture is not None
    return assemble_pipeline(
        model.architecture,
        pipeline_class,
        model.parts,
        config,
        options["dtype"],
        _tokenizers_from_shared_vocabulary(config),
        model.quantisation,
        encoder_dtypes={k: v for k, v in dtypes.items() if k != DEFAULT_COMPONENT},
    )


class Tier(Enum):
    """Where a loaded pipeline is: on its device, ready; or standing by in system RAM."""

    DEVICE = "device"
    STANDBY = "standby"


@dataclass
class _Entry:
    loaded: LoadedModel
    size_bytes: int
    tier: Tier = Tier.DEVICE
    # On the device beside it while its jobs need them: the runner's ControlNets.
    guidance_bytes: int = 0

    @property
    def device_bytes(self) -> int:
        """On the device: all of it and its guides, less an expert waiting in RAM (one
        expert at a time: `experts`)."""
        return self.size_bytes + self.guidance_bytes - experts.waiting_bytes(self.loaded.pipe)


@dataclass(frozen=True)
class Fetched:
    """How `PipelineCache.get` found its pipeline: already loaded, copied back from the RAM
    standby, or loaded from disk, and how long that took (for the job's timeline)."""

    how: str  # "loaded", "copied", "held"
    seconds: float = 0.0

    @property
    def note(self) -> str:
        if self.how == "held":
            return "model already loaded"
        if self.how == "copied":
            return f"model copied back from RAM in {self.seconds:.1f} s"
        return f"model loaded in {self.seconds:.1f} s"


def _inpainting_unet(model: ModelInfo, config: Path, dtype: Any) -> Any:
    """An inpainting checkpoint's UNet: the shipped config takes 4 channels, its weights 9."""
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel.from_single_file(
        str(model.path), config=str(config), subfolder="unet", in_channels=INPAINT_CHANNELS,
        torch_dtype=dtype, local_files_only=True,
    )  # fmt: skip


class PipelineCache:
    """Loaded pipelines keyed by (model path, device, dtype), within a memory budget.

    As many pipelines as fit `budget.device_bytes` stay on their device; the least recently
    used goes first, to system RAM while `budget.standby_bytes` has room (an accelerator's
    standby: a switch back is a copy, not a load), else it is dropped. Room is made before a
    load, from the size of the files to read, so two models never overfill memory at once.
    `max_models` caps the count as well (None: the budget alone decides).
    """

    def __init__(
        self,
        max_models: int | None = None,
        configs: SingleFileConfigs | None = None,
        lora_folders: Sequence[Path] | None = None,
        budget: MemoryBudget | None = None,
        budget_bytes: int = 0,
    ) -> None:
        self._max_models = max(1, max_models) if max_models is not None else None
        self._configs = configs
        self._lora_folders = lora_folders
        self._budget = budget
        self._budget_bytes = budget_bytes  # the user's setting (0: the machine's default)
        self._entries: OrderedDict[CacheKey, _Entry] = OrderedDict()  # most recent last
        self.last_fetch = Fetched("held")
        self.loads = 0  # pipelines read from disk, for benchmarks and tests

    def get(
        self, model: ModelInfo, device: DeviceChoice, loras: Sequence[LoraRef] = ()
    ) -> LoadedModel:
        """The pipeline for `model` with exactly `loras` applied: a LoRA of the previous job
        is removed first, so it can never leak into this one (a LoRA switch keeps the base
        model: only the adapter layers are unloaded and loaded)."""
        # Resolved first: an unknown LoRA name fails before a slow model load.
        resolved = resolve_loras(loras, self._lora_search()) if loras else []
        loaded = self._pipeline(model, device)
        loaded.use_loras(resolved)
        return loaded

    def budget_for(self, device: DeviceChoice) -> MemoryBudget:
        """The budget given, else measured now: on a GPU it follows the memory free (another
        worker or program may have taken or given back some since the last load)."""
        if self._budget is not None:
            return self._budget
        if self._budget_bytes:
            return MemoryBudget.total(self._budget_bytes, device.device)
        return default_budget(device.device)

    def holding(self, model: ModelInfo) -> LoadedModel | None:
        """The pipeline held for `model` (most recently used first), if any."""
        path = model.path.resolve()
        for entry in reversed(self._entries.values()):
            if entry.loaded.model.path.resolve() == path:
                return entry.loaded
        return None

    def held(self) -> list[tuple[ModelInfo, Tier]]:
        """The models held, on the device first, most recently used first."""
        entries = list(reversed(self._entries.values()))
        ordered = [e for e in entries if e.tier is Tier.DEVICE]
        ordered += [e for e in entries if e.tier is Tier.STANDBY]
        return [(e.loaded.model, e.tier) for e in ordered]

    def _lora_search(self) -> Sequence[Path]:
        return lora_folders() if self._lora_folders is None else self._lora_folders

    def _pipeline(self, model: ModelInfo, device: DeviceChoice) -> LoadedModel:
        key = (str(model.path.resolve()), device.device, device.dtype_name, device.low_vram)
        started = time.monotonic()
        budget_bytes = self.budget_for(device).device_bytes
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            if entry.tier is Tier.DEVICE:
                self.last_fetch = Fetched("held")
                return entry.loaded
            self._make_room(device, entry.size_bytes, keep=key)
            _place(entry.loaded.pipe, device, budget_bytes)  # back from RAM: a copy, not a read
            entry.tier = Tier.DEVICE
            self.last_fetch = Fetched("copied", time.monotonic() - started)
            return entry.loaded
        # Free before loading, not after: the files' size is what the weights will take
        # (near enough: a float16 file run in float32 takes twice, corrected just below).
        files = detected(model).files  # a split model: its text encoders and VAE too
        self._make_room(device, sum(weight_file_bytes(path) for path in files), keep=None)
        loaded = load_pipeline(model, device, self._configs, budget_bytes)
        self.loads += 1
        entry = self._entries[key] = _Entry(loaded, pipeline_bytes(loaded.pipe))
        self._make_room(device, entry.device_bytes, keep=key)
        self.last_fetch = Fetched("loaded", time.monotonic() - started)
        return loaded

    def _make_room(self, device: DeviceChoice, needed: int, keep: CacheKey | None) -> None:
        """Move or drop the least recently used until a model of `needed` bytes fits the
        device's budget beside the others (and the count fits `max_models`); `keep`, the one
        being placed, is never touched."""
        budget = self.budget_for(device)
        while True:
            others = [k for k, e in self._entries.items() if e.tier is Tier.DEVICE and k != keep]
            if not others:
                return
            used = sum(self._entries[k].device_bytes for k in others)
            too_many = self._max_models is not None and len(others) + 1 > self._max_models
            if used + needed <= budget.device_bytes and not too_many:
                return
            self._evict(others[0], budget)

    def account(self, loaded: LoadedModel, guidance_bytes: int) -> None:
        """Count what guides `loaded`'s job: its IP-Adapters (in the pipeline: counted
        again) and `guidance_bytes` of ControlNets beside it; others make room if now
        over budget."""
        for key, entry in self._entries.items():
            if entry.loaded is loaded:
                entry.size_bytes = pipeline_bytes(loaded.pipe)
                entry.guidance_bytes = guidance_bytes
                self._make_room(loaded.device, entry.device_bytes, keep=key)
                return

    def _evict(self, key: CacheKey, budget: MemoryBudget) -> None:
        entry = self._entries[key]
        entry.guidance_bytes = 0  # the runner drops its ControlNets before another job
        # Offloaded pipelines (low VRAM) carry hooks that place them: never stood by.
        standby = budget.standby_bytes and not entry.loaded.device.low_vram
        if standby and entry.size_bytes <= budget.standby_bytes:
            standing_by = [k for k, e in self._entries.items() if e.tier is Tier.STANDBY]
            while standing_by and (
                sum(self._entries[k].size_bytes for k in standing_by) + entry.size_bytes
                > budget.standby_bytes
            ):
                self._drop(standing_by.pop(0))
            entry.loaded.pipe.to("cpu")
            entry.tier = Tier.STANDBY
            log.info("model %s moved to RAM (memory budget)", entry.loaded.model.name)
        else:
            self._drop(key)
        _empty_device_cache()

    def _drop(self, key: CacheKey) -> None:
        entry = self._entries.pop(key)
        log.info("model %s unloaded (memory budget)", entry.loaded.model.name)
        del entry
        gc.collect()  # the pipeline's modules hold cycles: free the weights now, not later

    def clear(self) -> None:
        self._entries.clear()
        gc.collect()
        _empty_device_cache()


def _empty_device_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _folder_components(model: ModelInfo) -> dict[str, Any]:
    """The components a family builds itself for `from_pretrained` (`folder_components`)."""
    name = model.architecture.spec.folder_components if model.architecture else ""
    if not name:
        return {}
    module, function = name.split(":")
    build = getattr(importlib.import_module(module), function)
    components: dict[str, Any] = build(Path(model.path))
    return components


def _parts_left_out(model: ModelInfo) -> dict[str, None]:
    """Parts a pipeline runs without, as their stock pipelines allow (`optional_parts`: SD
    3.x without T5, its part of the prompt zeros). A folder saved without them says null
    in its model_index, which `from_pretrained` loads only when told the part is None."""
    names = model.architecture.spec.optional_parts if model.architecture else None
    if not names:
        return {}
    try:
        index = json.loads((Path(model.path) / MODEL_INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # _check_layout has said so already
    return {name: None for name in names if index.get(name) in (None, [None, None])}


def _check_layout(model: ModelInfo) -> None:
    index_path = Path(model.path) / MODEL_INDEX
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UnsupportedModel(
            f"model {model.name!r}: cannot read {index_path}: {error}"
        ) from error
    transformer = model.architecture is not None and model.architecture.is_transformer
    required = REQUIRED_TRANSFORMER_COMPONENTS if transformer else REQUIRED_COMPONENTS
    missing = [name for name in required if not isinstance(index, dict) or name not in index]
    if missing:
        raise UnsupportedModel(
            f"model {model.name!r} ({model.pipeline_class or 'unknown pipeline'}) is not a "
            f"pipeline Easel runs: missing {', '.join(missing)} in {index_path}"
        )
