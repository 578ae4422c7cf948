"""Every model family Easel runs, as each declares itself: the one place that says what a
family is (torch-free, so the GUI and detection ask it as freely as the worker).

A family is a package `app/engine/generation/families/<name>/`: its `__init__.py` holds
`FAMILIES`, one `FamilySpec` per `Architecture` it declares (the SD package declares SD 1.x
and SD 2.x, which one runtime class drives), and its `model.py` the runtime class behind
`ModelFamily`, named here by its dotted path and imported only by the worker (`driver`).
The registry finds the packages itself (`pkgutil`), so adding a family names it nowhere
else; `tests/engine/generation/test_family_registry.py` fails on an incomplete one.

Everything that differs between families is a field here; detection (files/), loading
(load/), the request checks, the window's sampler list and the runtime all read the
declaration instead of branching on the family.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any

# Where the family packages are: found by name, never imported statically from here (the
# families' runtime code imports the file detection below; this keeps that one way).
FAMILIES_PACKAGE = "app.engine.generation.families"


class Architecture(Enum):
    """The families' ids, as stored in the database and in settings; everything else about
    one is its `FamilySpec` (`spec_of`). A test checks each id has exactly one declaration."""

    SD1 = "sd1"
    SD2 = "sd2"
    SDXL = "sdxl"
    FLUX1 = "flux1"  # Flux.1 dev and schnell: a transformer on packed latents, CLIP + T5
    SD3 = "sd3"  # SD 3 and 3.5 (medium, large, large turbo): MMDiT, two CLIPs + T5
    ZIMAGE = "zimage"  # Z-Image (Turbo): a single-stream DiT, a Qwen3 text encoder
    FLUX2_KLEIN = "flux2-klein"  # Flux.2 Klein (4B, 9B; base and distilled): Qwen3, patched
    WAN21 = "wan2.1"  # Wan 2.1 text to video (1.3B, 14B): a 3D DiT, UMT5, the Wan VAE

    @property
    def spec(self) -> FamilySpec:
        return spec_of(self)

    @property
    def label(self) -> str:
        return spec_of(self).label

    @property
    def is_transformer(self) -> bool:
        """A flow-matching transformer family (no UNet): Flux, SD 3.x, Z-Image, Flux.2 Klein."""
        return spec_of(self).transformer


# A folder's configs as detection reads them: model_index.json and each component's config
# ("unet", "text_encoder", ...), every one a dict ({} where the folder has none).
FolderConfigs = Mapping[str, Mapping[str, Any]]
Shapes = dict[str, list[int]]


@dataclass(frozen=True)
class Folder:
    """How a diffusers folder of the family is recognised (architecture.detect_folder)."""

    pipelines: tuple[str, ...]  # model_index.json `_class_name`s it claims
    parts: tuple[str, ...]  # model_index entries it cannot run without
    # For families that share a pipeline class (SD 1.x and 2.x): whether this folder is
    # the family's, from its configs; None: every folder of `pipelines` is.
    claims: Callable[[FolderConfigs], bool] | None = None


@dataclass(frozen=True)
class CheckpointFile:
    """A UNet family's one-file checkpoint in the original (LDM / A1111) key layout."""

    markers: tuple[str, ...]  # key prefixes that make a file this family's (text encoders)
    parts: tuple[tuple[str, str], ...]  # (what a refusal calls it, its key prefix): all needed
    config_folder: str  # the shipped config folder it loads with (resources/model_configs)
    config_folder_v: str = ""  # ... when it is a v-prediction model, if another
    v_prediction: bool = False  # whether a file that does not say is v-prediction (SD 2.x)
    native_size_v: int = 0  # the native size of a v-prediction file, if another (SD 2.x)


@dataclass(frozen=True)
class TransformerFile:
    """A transformer family's diffusion model file (all-in-one, split, GGUF, fp8)."""

    markers: tuple[str, ...]  # key prefixes of its blocks (without model.diffusion_model.)
    split_parts: tuple[str, ...]  # the parts paired with it from the split folders, in order
    # The header read: what the file needs (files.transformer_files.FileNeeds: its shipped
    # config folder, the widths of its parts), or why it cannot be used.
    read_header: Callable[[Shapes, str], Any]
    # Assembled from its parts (load/assemble.py): the diffusers transformer class, each
    # part's pipeline component, and the transformer's key layout ("diffusers" needs no
    # conversion; "bfl": Black Forest Labs' original keys).
    transformer_class: str
    components: tuple[tuple[str, str], ...]
    key_layout: str = "diffusers"


@dataclass(frozen=True)
class Requests:
    """What a request may ask of the family (checked at submit: request_checks.py)."""

    samplers: tuple[str, ...] = ()  # the A1111 sampler names it takes; (): every one
    size_multiple: int = 8  # pixels per side a size must be a multiple of
    negative_prompt: bool = True  # False: it runs without CFG (a refusal, not a silent drop)
    distilled_guidance: bool = False  # `cfg` is an input of the model (Flux.1), not CFG
    img2img: bool = True  # an init image without a mask
    img2img_refusal: str = ""  # the sentence when it cannot
    reference_images: bool = True  # IP-Adapter references
    # Whether its folders may be step-distilled (`is_distilled` in model_index.json): a
    # distilled one runs without CFG, so it takes no negative prompt.
    step_distilled_folders: bool = False


@dataclass(frozen=True)
class FamilySpec:
    """One family, whole: what it is called, how its files are recognised, how it loads,
    what a request may ask of it and which runtime class drives it."""

    architecture: Architecture
    label: str  # for people: "SDXL"
    transformer: bool  # a flow-matching transformer (no UNet)
    native_size: int  # pixels per side it was trained at (a folder's configs may say more)
    folder: Folder
    pipeline: str  # the stock diffusers pipeline class it loads as
    # Every diffusers pipeline class its runtime class drives (family_of).
    driven_pipelines: tuple[str, ...]
    driver: str  # "module:Class" of its ModelFamily, imported by the worker only
    checkpoint_family: str  # `ModelFamily.name`: what its checkpoints say they were made by
    checkpoint_label: str  # what a message calls that (SD 1.x and 2.x share a runtime)
    requests: Requests = field(default_factory=Requests)
    checkpoint_file: CheckpointFile | None = None  # UNet families
    transformer_file: TransformerFile | None = None  # transformer families' single files
    load_options: tuple[tuple[str, Any], ...] = ()  # from_pretrained / from_single_file extras
    optional_parts: tuple[str, ...] = ()  # components a folder may leave out (null)
    float16_overflowing_encoders: tuple[str, ...] = ()  # components float16 overflows
    # Whether diffusers' First Block Cache runs in its loop as in its stock pipeline (a job's
    # speed; loop/step_cache.py). False: the stock pipeline with the hook fails or differs.
    step_cache: bool = False
    # Its own previewer, "module:Class" taking the pipeline (latents in another layout, as
    # Flux.2's patches); "": previews from plain latents (preview.py).
    preview: str = ""

    @property
    def id(self) -> str:
        return self.architecture.value

    def driver_class(self) -> Any:
        """The runtime class (imports torch: the worker's side only)."""
        module, name = self.driver.split(":")
        return getattr(importlib.import_module(module), name)


@cache
def families() -> tuple[FamilySpec, ...]:
    """Every family declared under `FAMILIES_PACKAGE`, in `Architecture` order."""
    package = importlib.import_module(FAMILIES_PACKAGE)
    found: list[FamilySpec] = []
    for module in pkgutil.iter_modules(package.__path__):
        if module.ispkg:
            declared = importlib.import_module(f"{FAMILIES_PACKAGE}.{module.name}")
            found.extend(getattr(declared, "FAMILIES", ()))
    order = list(Architecture)
    return tuple(sorted(found, key=lambda spec: order.index(spec.architecture)))


def spec_of(architecture: Architecture) -> FamilySpec:
    for spec in families():
        if spec.architecture is architecture:
            return spec
    raise LookupError(f"no family package declares {architecture.value!r}")


def families_easel_runs() -> str:
    """ "SD 1.x, SD 2.x, ..., or Flux.2 Klein": for messages that say what a model is not, so
    that they name every family and never fall behind when one is added."""
    labels = [spec.label for spec in families()]
    return f"{', '.join(labels[:-1])} or {labels[-1]}"
