"""One sentence for a model that failed to load, from what diffusers or transformers raised.

Their messages are written for Python programmers: several lines, a code sample to pass a
component by hand, advice on `low_cpu_mem_usage`. A job's error is read by an artist, so
it says which file and what is wrong with it, in words; the original goes to the log.
No torch import: it only reads messages (and the file's header, through `architecture`).
"""

from __future__ import annotations

import re

from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.files.transformer_files import detect_model_file

_MAX_DETAIL = 200  # characters of the loader's own first line, when nothing better is known
# diffusers' SingleFileComponentError: "Failed to load AutoencoderKL. Weights for this ..."
_FAILED_COMPONENT = re.compile(r"Failed to load (\w+)\. Weights for this component")
_COMPONENTS = {
    "UNet2DConditionModel": "UNet",
    "AutoencoderKL": "VAE",
    "CLIPTextModel": "text encoder",
    "CLIPTextModelWithProjection": "second text encoder (OpenCLIP ViT-bigG)",
}


def load_failure(model: ModelInfo, error: BaseException) -> str:
    """Why `model` did not load, as one line naming its file."""
    kind = model.architecture.label if model.architecture else "a diffusion model"
    what = _what(model, kind, error)
    return f"model {model.name!r} ({model.path}) could not be loaded as {kind}: {what}"


def _what(model: ModelInfo, kind: str, error: BaseException) -> str:
    if model.is_single_file:
        now = detect_model_file(model.path)  # the file may have changed since it was listed
        if not now.supported:
            return now.unsupported_reason
    text = str(error)
    if match := _FAILED_COMPONENT.search(text):
        part = _COMPONENTS.get(match.group(1), match.group(1))
        return f"its {part} weights are missing or not in a layout Easel knows"
    if isinstance(error, KeyError):
        return f"a weight it needs is missing ({error.args[0] if error.args else error})"
    if "meta tensor" in text:
        return "some of its weights are missing (the file is damaged or incomplete)"
    if "expected shape" in text or "size mismatch" in text:
        return f"its weights do not have the sizes of {kind} (a model of another layout?)"
    return _first_line(text) or type(error).__name__


def _first_line(text: str) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    line = line.rstrip(".:")
    return line if len(line) <= _MAX_DETAIL else line[: _MAX_DETAIL - 3].rstrip() + "..."
