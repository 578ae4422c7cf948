"""Wan 2.2 A14B's two experts as two files, paired into one model by their names.

Wan 2.2 T2V A14B is published as two diffusion model files of Wan 2.1 14B's shape: ComfyUI's
`wan2.2_t2v_high_noise_14B_fp16.safetensors` and `wan2.2_t2v_low_noise_14B_fp16.safetensors`
(and their fp8 twins), city96's `Wan2.2-T2V-A14B-HighNoise-Q8_0.gguf` and `...-LowNoise-...`;
Wan 2.2 I2V A14B the same way (`wan2.2_i2v_high_noise_14B_fp16.safetensors`, city96's
`Wan2.2-I2V-A14B-HighNoise-Q8_0.gguf`), each expert of Wan 2.1 I2V's shape without its CLIP
image embedding. Their tensors say nothing of which expert each is, so the names do: the
high-noise file is the model (listed, and detected with its twin as the `transformer_2`
part, loaded with the shipped two-expert config folder `wan2.2-t2v-a14b` or
`wan2.2-i2v-a14b`); its low-noise twin, the same name with "low" for "high" beside it, is
not listed on its own. A high-noise file without its twin is refused in one sentence naming
the file it looks for; an I2V expert named as neither (it never runs alone) too.

Pure filesystem (no torch), as detection is.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from app.engine.generation.files.architecture import Architecture, Detected, Part, unsupported
from app.engine.generation.files.transformer_files import detect_model_file

TRANSFORMER_2 = "transformer_2"  # the low-noise expert's part (the pipeline's component)
PAIR_CONFIG = "wan2.2-t2v-a14b"  # the shipped config folder of the pair (two experts)
# Wan 2.2 I2V A14B's (families/wan/files.py detects an expert of its shape with it).
I2V_PAIR_CONFIG = "wan2.2-i2v-a14b"
# "high_noise", "high-noise", "HighNoise", "highnoise": ComfyUI's and city96's spellings.
_HIGH = re.compile(r"(high)([_-]?)(noise)", re.IGNORECASE)
_LOW = re.compile(r"(low)([_-]?)(noise)", re.IGNORECASE)


def _swapped(name: str, pattern: re.Pattern[str], word: str) -> str | None:
    """`name` with its expert word replaced by `word` in the same case ("High" -> "Low")."""
    match = pattern.search(name)
    if match is None:
        return None
    found = match.group(1)
    twin = word.upper() if found.isupper() else word.capitalize() if found[0].isupper() else word
    return f"{name[: match.start(1)]}{twin}{name[match.end(1) :]}"


def low_noise_twin_name(path: Path) -> str | None:
    """The file name of the low-noise expert beside a high-noise one (None: not one)."""
    return _swapped(path.name, _HIGH, "low")


def is_low_noise_expert(path: Path) -> bool:
    """Whether `path` is the low-noise expert of a high-noise file beside it (then it is
    listed through that file, not on its own)."""
    high = _swapped(path.name, _LOW, "high")
    return high is not None and (path.parent / high).is_file()


def detect_paired(path: Path) -> Detected:
    """`detect_model_file`, a high-noise expert paired with its low-noise twin."""
    return paired(path, detect_model_file(path))


def _mismatch(high: Detected, low: Detected) -> str:
    """Why the low-noise file cannot run beside the high-noise one ("" when it can)."""
    if not low.supported:
        return f"cannot be used ({low.unsupported_reason})"
    if (low.architecture, low.config_name) != (high.architecture, high.config_name):
        return "is not a Wan transformer of the same size"
    if low.quantisation != high.quantisation:
        stored = {q: q or "unquantised" for q in (low.quantisation, high.quantisation)}
        return (
            f"is stored {stored[low.quantisation]}, the high-noise one "
            f"{stored[high.quantisation]}: give both experts in one precision"
        )
    return ""


def _pair_config(detected: Detected) -> str | None:
    """The config folder of the pair a detected file is the high-noise expert of: T2V
    A14B's for a Wan 2.1 text-to-video file, I2V A14B's for an expert of its shape (None:
    a file of no pair)."""
    if detected.config_name == I2V_PAIR_CONFIG:
        return I2V_PAIR_CONFIG
    return PAIR_CONFIG if detected.architecture is Architecture("wan2.1") else None


def paired(path: Path, detected: Detected) -> Detected:
    """A Wan diffusion model file's detection with its expert twin: a high-noise file with
    the low-noise one as `transformer_2` and the pair's config folder; unchanged for a file
    that names no expert or is not Wan's, but an I2V A14B expert named as no high-noise one
    (it never runs alone) is refused."""
    if not detected.supported:
        return detected
    pair_config = _pair_config(detected)
    twin_name = low_noise_twin_name(path)
    if pair_config == I2V_PAIR_CONFIG and twin_name is None:
        return unsupported(
            f"{path.stem}: an expert of Wan 2.2 I2V A14B runs only with its twin; Easel "
            "pairs them by their names, one with high_noise in it and one with low_noise "
            "(as ComfyUI's wan2.2_i2v_high_noise_14B_fp16.safetensors), and lists the "
            "high-noise one"
        )
    if twin_name is None or pair_config is None:
        return detected
    twin = path.parent / twin_name
    if not twin.is_file():
        return unsupported(
            f"{path.stem}: the high-noise expert of a Wan 2.2 A14B pair runs with its "
            f"low-noise expert beside it, {twin_name}, which is not in {path.parent.name}/"
        )
    mismatch = _mismatch(detected, detect_model_file(twin))
    if mismatch:
        return unsupported(f"{path.stem}: its low-noise expert {twin_name} {mismatch}")
    prefix = next((p.prefix for p in detected.parts if p.kind == "transformer"), "")
    parts = (*detected.parts, Part(TRANSFORMER_2, twin, prefix))
    return replace(detected, config_name=pair_config, parts=parts)
