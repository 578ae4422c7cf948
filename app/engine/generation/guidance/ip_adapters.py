"""IP-Adapter files: found in `<models folder>/ipadapter/`, in the layout artists download.

Torch-free. As h94/IP-Adapter ships them, a weight file (`ip-adapter_sd15.safetensors`,
`.bin`) sits beside an `image_encoder/` folder (the CLIP vision model it was trained with):
`ipadapter/<name>.safetensors` with `ipadapter/image_encoder/`, or one subfolder per pair
(`ipadapter/sdxl_models/...`). Named by the file's stem. The width it projects the image
to (its `proj.weight`, read from the header of a .safetensors) says which architecture it
fits; the loader checks that against the model's cross-attention width itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.engine.generation.files.architecture import SAFETENSORS_SUFFIX, read_safetensors_header
from app.engine.generation.files.registry import families
from app.engine.generation.files.sources import ModelSearchPath, default_search_path
from app.engine.paths import stays_inside
from app.errors import MissingModel

IP_ADAPTER_SUBFOLDER = "ipadapter"  # ComfyUI's models/ipadapter
IMAGE_ENCODER = "image_encoder"
_SUFFIXES = (SAFETENSORS_SUFFIX, ".bin")
_TOKENS = 4  # a plain IP-Adapter's image tokens


class IPAdapterNotFound(MissingModel):
    """No usable IP-Adapter of that name; the message says where it looked or why not."""


@dataclass(frozen=True)
class IPAdapterInfo:
    name: str
    path: Path  # the weight file
    cross_attention_dim: int | None  # what it projects images to (None: not read, a .bin)

    @property
    def image_encoder(self) -> Path:
        return self.path.parent / IMAGE_ENCODER

    @property
    def label(self) -> str:
        """The family whose cross-attention width it projects images to ("SDXL")."""
        widths = {s.guidance.cross_attention_width: s.label for s in families()}
        return widths.get(self.cross_attention_dim or 0, "IP-Adapter")


def ip_adapter_folders(search: ModelSearchPath | None = None) -> list[Path]:
    search = search or default_search_path()
    return [folder / IP_ADAPTER_SUBFOLDER for folder in search.user]


def list_ip_adapters(folders: Sequence[Path] | None = None) -> list[IPAdapterInfo]:
    found: dict[str, IPAdapterInfo] = {}
    for folder in ip_adapter_folders() if folders is None else folders:
        for candidate in [folder, *_subfolders(folder)]:
            if not (candidate / IMAGE_ENCODER).is_dir():
                continue
            for path in sorted(candidate.iterdir()):
                if path.is_file() and path.suffix.lower() in _SUFFIXES:
                    found.setdefault(path.stem, IPAdapterInfo(path.stem, path, _width(path)))
    return list(found.values())


def find_ip_adapter(
    name: str, folders: Sequence[Path] | None = None, *, names_only: bool = False
) -> IPAdapterInfo:
    """The IP-Adapter called `name`; `names_only` (a request from the network): its file
    and image encoder inside `folders`, links followed, and refusals that name no folder."""
    searched = ip_adapter_folders() if folders is None else list(folders)
    not_installed = IPAdapterNotFound(f"IP-Adapter {name!r} is not one of the installed ones")
    for info in list_ip_adapters(searched):
        if info.name == name:
            inside = all(stays_inside(p, searched) for p in (info.path, info.image_encoder))
            if names_only and not inside:
                raise not_installed
            return info
    if names_only:
        raise not_installed
    places = ", ".join(str(p) for p in searched) or "(no IP-Adapter folders)"
    raise IPAdapterNotFound(
        f"IP-Adapter {name!r} (a weight file beside an {IMAGE_ENCODER} folder) was not found; "
        f"looked in: {places}"
    )


def _subfolders(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and p.name != IMAGE_ENCODER)
    except OSError:
        return []


def _width(path: Path) -> int | None:
    if path.suffix.lower() != SAFETENSORS_SUFFIX:
        return None
    try:
        entry = read_safetensors_header(path).get("image_proj.proj.weight")
    except ValueError:
        return None
    shape = entry.get("shape") if isinstance(entry, dict) else None  # checked: ints
    return int(shape[0]) // _TOKENS if shape else None  # a scalar ([]) has no width
