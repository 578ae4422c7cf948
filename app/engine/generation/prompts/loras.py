"""LoRA references in prompts (`<lora:name:weight>`, AUTOMATIC1111's syntax) and their files.

Torch-free: the CLI and the GUI call `check_loras` at submit time so an unknown or broken
LoRA is refused before the job is stored; the worker's loader resolves the same way.
LoRA files are `.safetensors` in `<models folder>/lora/`, named by their file name without
the suffix (as A1111 does).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.engine.generation.errors import GenerationError
from app.engine.generation.files.architecture import SAFETENSORS_SUFFIX, read_safetensors_header
from app.engine.generation.files.sources import LORA_SUBFOLDER, ModelSearchPath, default_search_path
from app.engine.paths import is_inside
from app.errors import BadInput

# <lora:name> or <lora:name:0.8>; A1111 allows more fields after the weight (text encoder /
# UNet multipliers), which are accepted and ignored here.
_LORA_TAG = re.compile(r"<lora:([^:>]+)(?::([^:>]*))?(?::[^>]*)?>", re.IGNORECASE)
_LORA_KEY_MARKERS = ("lora_down", "lora_up", "lora_A", "lora_B", "lora.down", "lora.up")


class LoraError(GenerationError, BadInput):
    """A LoRA named in a prompt that cannot be used; the message names it and says why."""


@dataclass(frozen=True)
class LoraRef:
    name: str
    weight: float


@dataclass(frozen=True)
class ResolvedLora:
    name: str
    weight: float
    path: Path


def parse_loras(prompt: str) -> tuple[str, list[LoraRef]]:
    """The prompt without its `<lora:...>` tags (what the text encoder sees) and the tags."""
    refs: list[LoraRef] = []
    for match in _LORA_TAG.finditer(prompt):
        name, weight_text = match.group(1).strip(), match.group(2)
        refs.append(LoraRef(name, _weight(name, weight_text)))
    names = [ref.name for ref in refs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise LoraError(f"LoRA {twice[0]!r} appears more than once in the prompt")
    text = re.sub(r"\s+,", ",", _LORA_TAG.sub("", prompt))  # "cat <lora:x>, sky": "cat, sky"
    return re.sub(r"\s{2,}", " ", text).strip(" ,"), refs


def prompt_text(prompt: str) -> str:
    return parse_loras(prompt)[0]


def _weight(name: str, text: str | None) -> float:
    if text is None or not text.strip():
        return 1.0
    try:
        return float(text)
    except ValueError:
        raise LoraError(f"LoRA {name!r}: weight {text!r} is not a number") from None


def lora_folders(search: ModelSearchPath | None = None) -> list[Path]:
    search = search or default_search_path()
    return [folder / LORA_SUBFOLDER for folder in search.user]


def available_loras(folders: Sequence[Path]) -> dict[str, Path]:
    """name -> file for every LoRA file in `folders` (the first folder wins a name clash)."""
    found: dict[str, Path] = {}
    for folder in folders:
        try:
            files = sorted(folder.iterdir())
        except OSError:
            continue
        for path in files:
            if path.suffix.lower() == SAFETENSORS_SUFFIX and path.is_file():
                found.setdefault(path.stem, path)
    return found


def installed_loras(search: ModelSearchPath | None = None) -> dict[str, Path]:
    """`available_loras` that a request from the network may name: each file inside the
    LoRA folders, links followed."""
    folders = lora_folders(search)
    return {name: path for name, path in available_loras(folders).items()
            if is_inside(path, folders)}  # fmt: skip


PREVIEW_SUFFIXES = (".preview.png", ".png", ".preview.jpg", ".jpg", ".preview.webp", ".webp")


def lora_preview(path: Path) -> Path | None:
    """The picture beside a LoRA file, as A1111 finds it: `name.preview.png`, else
    `name.png` (and the same in jpg and webp); None if there is none."""
    for suffix in PREVIEW_SUFFIXES:
        candidate = path.with_name(path.stem + suffix)
        if candidate.is_file():
            return candidate
    return None


def check_loras(
    prompt: str, search: ModelSearchPath | None = None, *, names_only: bool = False
) -> list[ResolvedLora]:
    """Every LoRA the prompt names, resolved to a usable file, or `LoraError` saying which
    one is unknown (and which exist) or why its file cannot be used. Call at submit time."""
    return resolve_loras(parse_loras(prompt)[1], lora_folders(search), names_only=names_only)


def resolve_loras(
    refs: Sequence[LoraRef], folders: Sequence[Path], *, names_only: bool = False
) -> list[ResolvedLora]:
    """`names_only` (a request from the network, a job on a shared queue): each file inside
    `folders`, links followed, and a refusal that names no folder."""
    if not refs:
        return []
    available = available_loras(folders)
    resolved = []
    for ref in refs:
        path = available.get(ref.name)
        if names_only and (path is None or not is_inside(path, folders)):
            raise LoraError(
                f"LoRA {ref.name!r} is not one of the installed LoRAs; GET /api/v1/loras lists them"
            )
        if path is None:
            known = ", ".join(sorted(available)) or "none"
            places = ", ".join(str(f) for f in folders) or "(no LoRA folder)"
            raise LoraError(f"LoRA {ref.name!r} was not found in {places} (available: {known})")
        _check_lora_file(ref.name, path)
        resolved.append(ResolvedLora(ref.name, ref.weight, path))
    return resolved


def _check_lora_file(name: str, path: Path) -> None:
    try:
        header = read_safetensors_header(path)
    except ValueError as error:
        raise LoraError(f"LoRA {name!r} ({path.name}) cannot be used: {error}") from error
    if not any(marker in key for key in header for marker in _LORA_KEY_MARKERS):
        raise LoraError(f"{path.name} is not a LoRA (no LoRA weights in it); is it a checkpoint?")
