"""Every model family Easel runs, as each declares itself: the one place that says what a
family is (torch-free, so the GUI and detection ask it as freely as the worker).

A family is a package `app/engine/generation/families/<name>/`: its `__init__.py` declares
its id(s) (`Architecture.declare`) and holds `FAMILIES`, one `FamilySpec` per id (the SD
package declares SD 1.x and SD 2.x, which one runtime class drives), and its `model.py` the
runtime class behind `ModelFamily`, named here by its dotted path and imported only by the
worker (`driver`).
The registry finds the packages itself (`pkgutil`), so adding a family names it nowhere
else; `tests/engine/generation/test_family_registry.py` fails on an incomplete one.

Everything that differs between families is a field here; detection (files/), loading
(load/), the request checks, the window's sampler list and the runtime all read the
declaration instead of branching on the family.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import Any, ClassVar

# Where the family packages are: found by name, never imported statically from here (the
# families' runtime code imports the file detection below; this keeps that one way).
FAMILIES_PACKAGE = "app.engine.generation.families"


class _Declared(type):
    """`Architecture`'s class: its members are the ids the family packages declare, so it is
    asked as an Enum would be (`Architecture.SDXL`, `Architecture("sdxl")`, `list(...)`)
    while no list of families is written here. Asking for the members loads the packages."""

    _by_value: dict[str, Architecture]

    def __getattr__(cls, name: str) -> Architecture:
        # Only for a name not yet set by `declare`: its package may not be imported yet.
        if name.startswith("_"):
            raise AttributeError(name)
        _import_family_packages()
        found = cls.__dict__.get(name)
        if not isinstance(found, Architecture):
            raise AttributeError(f"no family package declares Architecture.{name}")
        return found

    def __call__(cls, value: str | Architecture) -> Architecture:
        if isinstance(value, Architecture):
            return value
        if value not in cls._by_value:
            _import_family_packages()
        try:
            return cls._by_value[value]
        except KeyError:
            raise ValueError(f"{value!r} is not a model family Easel runs") from None

    def __iter__(cls) -> Iterator[Architecture]:
        """In the order the families came out (then by id): how messages list them."""
        _import_family_packages()
        return iter(sorted(cls._by_value.values(), key=lambda a: (a.released, a.value)))

    def __len__(cls) -> int:
        _import_family_packages()
        return len(cls._by_value)

    def __contains__(cls, value: object) -> bool:
        return isinstance(value, Architecture) and cls._by_value.get(value.value) is value


class Architecture(metaclass=_Declared):
    """A family's id, as stored in the database and in settings; everything else about one is
    its `FamilySpec` (`spec_of`). Each family package declares its own
    (`SDXL_ID = Architecture.declare("sdxl", released="2023-07")`), which makes it
    `Architecture.SDXL`; one instance per id, so ids compare with `is`. A test checks each
    id has exactly one `FamilySpec`."""

    _by_value: ClassVar[dict[str, Architecture]] = {}
    __slots__ = ("name", "released", "value")

    def __init__(self, value: str) -> None:
        # Called by `declare` only: `Architecture("sdxl")` goes to the metaclass's look-up.
        self.value = value  # "sdxl": what is stored
        # "SDXL", "FLUX2_KLEIN", "WAN2_1": the attribute it is asked by
        self.name = value.upper().replace("-", "_").replace(".", "_")
        self.released = ""  # "2023-07": when the family came out, its place in lists

    @classmethod
    def declare(cls, value: str, *, released: str) -> Architecture:
        """The id `value` ("flux2-klein"), asked for as `Architecture.FLUX2_KLEIN`; called once,
        by the family's own package."""
        # The metaclass's __call__ looks ids up: a new one is made past it, by type's own.
        declared: Architecture = type.__call__(cls, value)
        if not declared.name.isidentifier() or value in cls._by_value or declared.name in vars(cls):
            raise ValueError(f"family id {value!r} is taken or cannot be an attribute name")
        declared.released = released
        cls._by_value[value] = declared
        setattr(cls, declared.name, declared)
        return declared

    def __repr__(self) -> str:
        return f"Architecture.{self.name}"

    def __str__(self) -> str:
        return self.value

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # Unpickled (a worker's message, a deepcopy) as the one declared instance, not a copy.
        return (Architecture, (self.value,))

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
    # Files that are part of the family's but cannot run alone, each as (the key prefix that
    # gives it away when no marker is there, the sentence that refuses it): SDXL's refiner.
    refused: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TransformerFile:
    """A transformer family's diffusion model file (all-in-one, split, GGUF, fp8)."""

    markers: tuple[str, ...]  # key prefixes of its blocks (without model.diffusion_model.)
    split_parts: tuple[str, ...]  # the parts paired with it from the split folders, in order
    # The header read: what the file needs (files.transformer_files.FileNeeds: its shipped
    # config folder, the widths of its parts), or why it cannot be used.
    read_header: Callable[[Shapes, str], Any]
    # Assembled from its parts (load/assemble.py): the diffusers transformer class, each
    # part's pipeline component, and the "module:function" that turns the transformer's
    # keys into diffusers' ("": they are, or diffusers converts them itself).
    transformer_class: str
    components: tuple[tuple[str, str], ...]
    to_diffusers_keys: str = ""
    # Why its files cannot load where Easel ships no config folder for them (one sentence,
    # after the model's name); "": the folders are shipped, and a missing one is damage.
    configs_not_shipped: str = ""
    # Tokenizers a family's text encoder files carry or point to (UMT5's: families/wan/umt5.py):
    # "module:function" from the parts to the pipeline's tokenizers (assemble.py), and the
    # torch-free check detection runs on the parts found ("": they will have them).
    tokenizers: str = ""
    parts_problem: Callable[[dict[str, Any]], str] | None = None
    # For families whose files share markers (Flux.1, Flux.1 Kontext, Chroma: Black Forest
    # Labs' blocks): whether a file is this family's, from its keys (without
    # model.diffusion_model.) and its name. A family that claims one is chosen before one
    # that claims every file of its markers (None).
    claims: Callable[[list[str], str], bool] | None = None
    # What its pipeline needs that no weights file carries (Qwen2.5's tokenizer): the
    # diffusion model file's path -> {what: folder} found beside it or in the HF cache, or
    # the sentence saying what is missing and where to put it. None: nothing such.
    find_folders: Callable[[Any], dict[str, Any] | str] | None = None
    # Parts diffusers' single-file loaders cannot build (Qwen2.5-VL, Qwen-Image's VAE):
    # (part kind, "module:function" of (weights, config folder, component, dtype) -> module).
    part_loaders: tuple[tuple[str, str], ...] = ()
    # "module:function" of (config folder, `find_folders`' folders) -> the pipeline
    # components built from those folders (its tokenizer, an Edit model's processor).
    folder_components: str = ""
    # What a refusal calls a missing part of its own, where the generic name would mislead
    # (Qwen-Image's VAE is of Wan 2.1's kind): (part kind, words).
    part_names: tuple[tuple[str, str], ...] = ()
    # For families whose config depends on the VAE paired with the file as well (LTX-Video:
    # the 0.9.0 and 0.9.1 decoders differ): given what the transformer's header said and the
    # VAE's shapes (its prefix taken off), what the files need, or why they cannot be used.
    read_vae: Callable[[Any, Shapes], Any] | None = None


@dataclass(frozen=True)
class Guidance:
    """Which ControlNets and IP-Adapters fit the family, as their configs and headers tell
    (guidance/controlnets.py, ip_adapters.py); the default: none do."""

    # Its UNet's cross-attention width: what its ControlNets' `attn2.to_k` read and its
    # IP-Adapters project images to. 0: no ControlNet or IP-Adapter is the family's.
    cross_attention_width: int = 0
    # Its UNet's `addition_embed_type` ("text_time"), which its ControlNets carry too (in the
    # original layout as `label_emb`, which diffusers' converter drops: control.py maps it).
    added_embedding: str = ""
    # Whether diffusers' ControlNet Union (one net, many control types) is made for it.
    controlnet_union: bool = False
    # The diffusers class of its own ControlNets, told by a folder's config alone
    # ("FluxControlNetModel"); "": UNet ControlNets, told by their widths as above.
    controlnet_class: str = ""
    # Its Union ControlNets' control types by index (`control_mode`): each layer's type
    # must be one of them (jobs.params: SDXL_UNION_TYPES, FLUX_UNION_TYPES).
    union_types: tuple[str, ...] = ()


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
    redux_references: bool = False  # references through a Flux.1 Redux model instead
    edit: bool = False  # an edit job (an instruction and an input image: jobs.params.KIND_EDIT)
    edit_images: int = 1  # the most input images an edit reads (Qwen-Image-Edit Plus: 3)
    # What an edit runs with unless told: its stock pipeline's defaults (FluxKontextPipeline's
    # 28 steps and guidance 3.5; Qwen-Image-Edit's 50 steps and true_cfg_scale 4).
    edit_steps: int = 28
    edit_cfg: float = 3.5
    max_area: int = 0  # the most pixels (width x height) it draws; 0: no bound of its own
    # The sentence refusing a job without a mask, for a model that only inpaints (Flux.1
    # Fill); "": it draws without one too.
    needs_mask: str = ""
    # The sentence refusing a job that is not an edit, for a model that only edits
    # (Qwen-Image-Edit); "": it draws without an input image too.
    needs_edit: str = ""
    # The only (width, height) it inpaints at, its whole picture only ("only masked" off):
    # Flux.1 Kontext's inpaint pipeline draws at the one nearest the picture's shape.
    # (): any size, and "only masked" too.
    inpaint_sizes: tuple[tuple[int, int], ...] = ()
    # Whether its folders may be step-distilled (`is_distilled` in model_index.json): a
    # distilled one runs without CFG, so it takes no negative prompt.
    step_distilled_folders: bool = False
    # Whether its sampler runs a job's own list of timesteps (`jobs.params.TIMESTEPS`: a
    # timestep-distilled model's, LTX-Video 0.9.7 and 0.9.8 distilled); others refuse one.
    timesteps: bool = False


@dataclass(frozen=True)
class VideoRequests:
    """What a video family takes (families/video_params.py checks a job against it)."""

    frame_step: int  # frames per latent frame after the first: counts of frame_step*k + 1
    default_frames: int  # the stock pipeline's default count (Wan 2.1: 81, 5 s at 16 fps)
    default_fps: int  # the rate its clips were trained at
    takes_image: bool = False  # an input image (the job's init image) to animate
    needs_image: bool = False  # ... and it draws nothing without one (image to video)
    takes_last_image: bool = False  # a last frame beside the first (Wan 2.1 FLF2V)
    needs_last_image: bool = False  # ... and it draws nothing without one
    # A strength per conditioning image and the last image's frame (LTX-Video 0.9.5+)
    weighs_images: bool = False


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
    guidance: Guidance = field(default_factory=Guidance)
    checkpoint_file: CheckpointFile | None = None  # UNet families
    transformer_file: TransformerFile | None = None  # transformer families' single files
    load_options: tuple[tuple[str, Any], ...] = ()  # from_pretrained / from_single_file extras
    # "module:function" of a folder's path -> the components `from_pretrained` is handed
    # (ones transformers cannot load here: Qwen-Image-Edit's processor without torchvision).
    folder_components: str = ""
    optional_parts: tuple[str, ...] = ()  # components a folder may leave out (null)
    float16_overflowing_encoders: tuple[str, ...] = ()  # components float16 overflows
    # Whether diffusers' First Block Cache runs in its loop as in its stock pipeline (a job's
    # speed; loop/step_cache.py). False: the stock pipeline with the hook fails or differs.
    step_cache: bool = False
    # Whether its transformer's attention runs through diffusers' dispatcher without a mask,
    # so that a faster backend (FlashAttention) may run it (load/attention.py).
    attention_backends: bool = False
    video: VideoRequests | None = None  # a video family's frames; None: it draws images
    # Its own previewer, "module:Class" taking the pipeline (latents in another layout, as
    # Flux.2's patches); "": previews from plain latents (preview.py).
    preview: str = ""
    # A big VAE's cheap preview: each latent channel's (R, G, B) weight, scaled latents ->
    # RGB in [-1, 1]; (): grey (preview.py). A tiny VAE decodes instead.
    preview_factors: tuple[tuple[float, float, float], ...] = ()

    @property
    def id(self) -> str:
        return self.architecture.value

    def driver_class(self) -> Any:
        """The runtime class (imports torch: the worker's side only)."""
        module, name = self.driver.split(":")
        return getattr(importlib.import_module(module), name)


def _family_packages() -> list[ModuleType]:
    """Every family package under `FAMILIES_PACKAGE`, imported (each declares its ids and its
    `FAMILIES` as it is imported)."""
    package = importlib.import_module(FAMILIES_PACKAGE)
    found = pkgutil.iter_modules(package.__path__)
    return [importlib.import_module(f"{FAMILIES_PACKAGE}.{m.name}") for m in found if m.ispkg]


_imported = False


def _import_family_packages() -> None:
    """What asking for an id that is not declared yet does first; later calls cost a flag."""
    global _imported
    if not _imported:
        _family_packages()
        _imported = True


@cache
def families() -> tuple[FamilySpec, ...]:
    """Every family declared under `FAMILIES_PACKAGE`, in `Architecture` order."""
    found = [spec for package in _family_packages() for spec in getattr(package, "FAMILIES", ())]
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


def step_cache_labels() -> list[str]:
    """["Flux.1", "Wan 2.1", ..., "Qwen-Image"]: the families whose declaration says step
    caching runs on them (the refusal, the command line's help, the window's tooltip)."""
    return [spec.label for spec in families() if spec.step_cache]


def step_cache_families() -> str:
    """ "Flux.1, Wan 2.1, ... and Qwen-Image": `step_cache_labels` as an English sentence says
    them."""
    labels = step_cache_labels()
    return " and ".join(filter(None, (", ".join(labels[:-1]), labels[-1])))
