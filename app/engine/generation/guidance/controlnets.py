"""ControlNet files: found in `<models folder>/controlnet/`, told apart by their tensors.

Torch-free (the CLI and the GUI list and check them at submit). A ControlNet is a diffusers
folder (`config.json` of a `ControlNetModel` and its weights) or one `.safetensors` file,
in the original layout (`control_model.*`, as A1111's and ComfyUI's `models/controlnet/`
hold them) or with diffusers' key names. Which family it fits is read from its config or,
for a file, from its header only (tensor names and shapes, no weights), against what each
family declares (`FamilySpec.guidance`): the added embedding its UNet has (SDXL's
"text_time"), else its cross-attention width (SD 1.x 768, SD 2.x 1024).

A ControlNet Union (one net for many control types, `ControlNetUnionModel`) is told by its
config's class or, for a file, by its `task_embedding` (one row per control type); it is
the family's that declares `controlnet_union`.

A transformer family's ControlNets are told by their config's class alone (Flux.1's
`FluxControlNetModel`: the family that declares it as its `controlnet_class`); a Union of
them has a `num_mode` (its control types: the family's `union_types`). Those are diffusers
folders or single files (diffusers' keys or XLabs' own, `flux_control_files`), a file's
config read from its tensors' shapes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.engine.generation.files.architecture import (
    SAFETENSORS_SUFFIX,
    Architecture,
    header_shapes,
    read_safetensors_header,
)
from app.engine.generation.files.registry import families
from app.engine.generation.files.sources import ModelSearchPath, default_search_path
from app.engine.generation.guidance import flux_control_files as flux_files
from app.engine.jobs.params import SDXL_UNION_TYPES, ControlLayer, GenerationParams
from app.engine.paths import stays_inside
from app.errors import BadInput, MissingModel

CONTROLNET_SUBFOLDER = "controlnet"  # ComfyUI's models/controlnet; A1111's models/ControlNet
_CONFIG = "config.json"


UNION_CLASS = "ControlNetUnionModel"
# Flux.1's ControlNets' class (its family declares it as its `controlnet_class`).
FLUX_CONTROLNET_CLASS = "FluxControlNetModel"
UNION_KEY = "task_embedding"  # [control types, channels]: only a Union has it


class ControlNetNotFound(MissingModel):
    """No ControlNet of that name; the message names it and the folders searched."""


class ControlNetMismatch(BadInput):
    """A ControlNet made for another architecture than the job's model."""


@dataclass(frozen=True)
class ControlNetInfo:
    name: str
    path: Path
    architecture: Architecture | None
    # "diffusers" (a folder or a file with diffusers' keys), "original" (`control_model.*`)
    # or "xlabs" (XLabs' Flux.1 ControlNet files)
    layout: str
    unsupported_reason: str = ""
    union: bool = False  # a ControlNet Union: each layer says its control type

    @property
    def supported(self) -> bool:
        return self.architecture is not None and not self.unsupported_reason

    @property
    def label(self) -> str:
        return self.architecture.label if self.supported and self.architecture else "unsupported"


def controlnet_folders(search: ModelSearchPath | None = None) -> list[Path]:
    search = search or default_search_path()
    return [folder / CONTROLNET_SUBFOLDER for folder in search.user]


def list_controlnets(folders: Sequence[Path] | None = None) -> list[ControlNetInfo]:
    """Every ControlNet in `folders` (the first folder wins a name clash), by name."""
    found: dict[str, ControlNetInfo] = {}
    for folder in controlnet_folders() if folders is None else folders:
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            info = _detect(entry)
            if info is not None:
                found.setdefault(info.name, info)
    return list(found.values())


def find_controlnet(
    name: str, folders: Sequence[Path] | None = None, *, names_only: bool = False
) -> ControlNetInfo:
    """The usable ControlNet called `name`, or a one-sentence error saying why not.

    `names_only` (a request from the network): its files inside `folders`, links followed,
    and refusals that name no folder."""
    searched = controlnet_folders() if folders is None else list(folders)
    not_installed = ControlNetNotFound(
        f"ControlNet {name!r} is not one of the installed ControlNets"
    )
    for info in list_controlnets(searched):
        if info.name == name:
            if names_only and not stays_inside(info.path, searched):
                raise not_installed
            if not info.supported:
                raise ControlNetNotFound(
                    f"ControlNet {name!r} cannot be used: {info.unsupported_reason}"
                )
            return info
    if names_only:
        raise not_installed
    places = ", ".join(str(p) for p in searched) or "(no ControlNet folders)"
    raise ControlNetNotFound(f"ControlNet {name!r} was not found; looked in: {places}")


def check_fits(control: ControlNetInfo, model_name: str, architecture: Architecture | None) -> None:
    """Refuse a ControlNet made for another architecture than the model's, naming both."""
    if architecture is None or control.architecture is architecture:
        return
    made_for = control.architecture.label if control.architecture else "an unknown architecture"
    raise ControlNetMismatch(
        f"ControlNet {control.name!r} is for {made_for}, but model {model_name!r} is "
        f"{architecture.label}"
    )


def check_control_type(control: ControlNetInfo, layer: ControlLayer, index: int) -> None:
    """A ControlNet Union is told each layer's control type: refuse a layer that has none,
    or one its table lacks (Flux.1's Unions have no softedge, SDXL's no blur)."""
    if not control.union:
        return
    types = union_types(control.architecture)
    if not layer.union_type:
        raise ControlNetMismatch(
            f"control layer {index} uses ControlNet Union {control.name!r}: give its control "
            f"type ({', '.join(types)})"
        )
    if layer.union_type not in types:
        raise ControlNetMismatch(
            f"control layer {index}'s control type {layer.union_type!r} is not one that "
            f"ControlNet Union {control.name!r} takes ({', '.join(types)})"
        )


def union_types(architecture: Architecture | None) -> tuple[str, ...]:
    """The control types, by index, of a Union ControlNet made for `architecture`."""
    declared = architecture.spec.guidance.union_types if architecture is not None else ()
    return declared or SDXL_UNION_TYPES


def check_job_kind(control: ControlNetInfo, params: GenerationParams, index: int) -> None:
    """Flux.1's ControlNets guide text to image, img2img and inpaint as diffusers' Flux
    ControlNet pipelines do, uncached and on the whole picture: the inpaint pipeline's
    `padding_mask_crop` answers the cut box without pasting it back, so "only masked" has
    no stock image to equal; nor has step caching, since diffusers 0.42's pipelines fail
    with First Block Cache ("No cache context is set"). Refused rather than run unlike
    stock."""
    arch = control.architecture
    if arch is None or not arch.spec.guidance.controlnet_class:
        return
    if params.mask and params.only_masked:
        raise ControlNetMismatch(
            f"control layer {index}: {arch.label} ControlNets inpaint the whole picture, not "
            "only the masked area; switch only masked off"
        )
    if params.cache_threshold:
        raise ControlNetMismatch(
            f"control layer {index}: step caching does not work with {arch.label} ControlNets "
            "yet; set speed to off"
        )


def _detect(entry: Path) -> ControlNetInfo | None:
    if entry.is_dir():
        return _detect_folder(entry)
    if entry.suffix.lower() == SAFETENSORS_SUFFIX:
        return _detect_file(entry)
    return None


def _detect_folder(folder: Path) -> ControlNetInfo | None:
    try:
        config = json.loads((folder / _CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested beyond reason
        return None
    if not isinstance(config, dict):
        return None
    own = _family_of_class(str(config.get("_class_name")))
    if own is not None:  # a transformer family's ControlNet (Flux.1's), by its class
        union = config.get("num_mode") is not None
        return ControlNetInfo(folder.name, folder, own, "diffusers", union=union)
    union = config.get("_class_name") == UNION_CLASS
    if config.get("_class_name") != "ControlNetModel" and not union:
        return None
    added = str(config.get("addition_embed_type") or "")
    if union:
        architecture = _union_family(added)
        reason = "" if architecture else _union_refusal()
        return ControlNetInfo(folder.name, folder, architecture, "diffusers", reason, union=True)
    width = config.get("cross_attention_dim")
    architecture = _family(added, {width} if isinstance(width, int) else set())
    return ControlNetInfo(folder.name, folder, architecture, "diffusers")


def _family_of_class(class_name: str) -> Architecture | None:
    """The family whose own ControlNets are of diffusers' class `class_name`, if any."""
    owners = [s for s in families() if s.guidance.controlnet_class == class_name]
    return owners[0].architecture if owners else None


def _family(added: str, widths: set[int]) -> Architecture:
    """The family a ControlNet with the added embedding `added` ("": none) and these
    cross-attention widths fits: the one whose UNet has that embedding, else the one of
    that width; a net of a width no family declares is taken as the oldest family's
    without an added embedding (SD 1.x), as Easel always has."""
    fitting = [s for s in families() if s.guidance.cross_attention_width]
    if added:
        embedded = [s for s in fitting if s.guidance.added_embedding == added]
        if embedded:
            return embedded[0].architecture
    plain = [s for s in fitting if not s.guidance.added_embedding]
    wide = [s for s in plain if s.guidance.cross_attention_width in widths]
    return (wide or plain)[0].architecture


def _union_family(added: str) -> Architecture | None:
    """The family a ControlNet Union with the added embedding `added` is made for, if any
    (diffusers' Union pipelines run only the families that declare `controlnet_union`)."""
    unions = [s for s in families() if s.guidance.controlnet_union]
    return next((s.architecture for s in unions if s.guidance.added_embedding == added), None)


def _union_refusal() -> str:
    made_for = " or ".join(s.label for s in families() if s.guidance.controlnet_union)
    return (
        f"a ControlNet Union not made for {made_for} (diffusers' Union pipelines are only for it)"
    )


def _detect_file(path: Path) -> ControlNetInfo | None:
    try:
        header = read_safetensors_header(path)
    except ValueError as error:
        return ControlNetInfo(path.stem, path, None, "", f"the file is unreadable: {error}")
    keys = [key for key in header if key != "__metadata__"]
    if flux_files.is_flux_controlnet(keys):
        return _detect_flux_file(path, header_shapes(header))
    if any(key.startswith("control_model.") for key in keys):
        prefix, layout, added = "control_model.", "original", "control_model.label_emb."
    elif any(key.startswith("controlnet_cond_embedding.") for key in keys):
        prefix, layout, added = "", "diffusers", "add_embedding."
    else:
        return None  # some other file (a LoRA, a checkpoint): not listed as a ControlNet
    if layout == "diffusers" and UNION_KEY in keys:
        # A Union file (diffusers' keys) carries the added embedding of the family it is for.
        architecture = _union_family(_TEXT_TIME if _has(keys, added) else "")
        reason = "" if architecture else _union_refusal()
        return ControlNetInfo(path.stem, path, architecture, layout, reason, union=True)
    if _has(keys, added):
        # In the original layout diffusers 0.42's converter drops the added embedding
        # (`label_emb`): `control._load_original_added_embedding` maps it itself.
        return ControlNetInfo(path.stem, path, _family(_TEXT_TIME, set()), layout)
    widths = {
        header[key]["shape"][1]
        for key in keys
        if key.startswith(prefix)
        and key.endswith("attn2.to_k.weight")
        and len(header[key]["shape"]) > 1  # a file from anyone: a matrix, or no width
    }
    return ControlNetInfo(path.stem, path, _family("", widths), layout)


# The added embedding a file's header shows only as tensors: the one diffusers knows as
# "text_time" (a family's `added_embedding`), the only kind ControlNets have.
_TEXT_TIME = "text_time"


def _has(keys: list[str], prefix: str) -> bool:
    return any(key.startswith(prefix) for key in keys)


def _detect_flux_file(path: Path, shapes: dict[str, list[int]]) -> ControlNetInfo:
    """A Flux.1 ControlNet file (diffusers' keys or XLabs' own): its config is read from its
    shapes here, so a file Easel cannot make a net of is refused at submit."""
    flux = _family_of_class(FLUX_CONTROLNET_CLASS)
    keys = list(shapes)
    layout = "xlabs" if flux_files.is_xlabs(keys) else "diffusers"
    try:
        flux_files.config_from_shapes(flux_files.diffusers_shapes(shapes))
    except flux_files.UnreadableFluxControlNet as error:
        reason = f"it is not a Flux.1 ControlNet file Easel can read: {error}"
        return ControlNetInfo(path.stem, path, flux, layout, reason)
    return ControlNetInfo(path.stem, path, flux, layout, union=flux_files.is_union(keys))
