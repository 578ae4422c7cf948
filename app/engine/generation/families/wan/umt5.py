"""UMT5's tokenizer for Wan's split files, where a diffusers folder has its `tokenizer/`.

UMT5-XXL's vocabulary is a SentencePiece model of 256,000 pieces (and 300 sentinels,
`<extra_id_N>`): too large to ship, and Easel reaches no hub. It is found, in this order:
- a tokenizer folder beside the text encoder file (`text_encoders/umt5-xxl/`, or a folder
  named as the file): google/umt5-xxl's files (`spiece.model` or `tokenizer.json`), which an
  artist put there on purpose;
- the file itself: ComfyUI writes the SentencePiece model into its UMT5 files as a uint8
  tensor `spiece_model` (comfy/text_encoders/wan.py `UMT5XXlTokenizer.state_dict`; comfy/sd.py
  reads it back as `tokenizer_data["spiece_model"]`), so `umt5_xxl_fp16.safetensors` and
  its fp8 copies carry their tokenizer;
- a Hugging Face cache snapshot of google/umt5-xxl or of a Wan-AI Wan 2.1/2.2 repository.

The bytes become a tokenizer through transformers' own conversion (`T5Tokenizer.from_pretrained`
on a folder holding the model as `spiece.model`, with google/umt5-xxl's settings): the
tokenizer a google/umt5-xxl folder gives, token for token. That conversion reads the
SentencePiece model with the `sentencepiece` and `protobuf` packages.

The search (`tokenizer_source`) is torch-free and reads headers only: detection calls it,
so a file without a tokenizer anywhere is refused in one sentence before a job is stored,
and so is one whose `spiece_model` cannot be a SentencePiece model by its header (not
bytes, empty, or larger than any: `embedded_problem`). Bytes that are no SentencePiece model
(garbage, a truncated copy) are found when the job loads them, before transformers reads
them (whose own error for them is a request to install tiktoken), and refused so too.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.generation.errors import ModelLoadFailed, UnsupportedModel
from app.engine.generation.files.architecture import Part, read_safetensors_header
from app.engine.generation.files.sources import hf_cache_dirs
from app.engine.generation.files.transformer_files import UMT5

EMBEDDED_KEY = "spiece_model"  # ComfyUI's name of the SentencePiece model in the file
# What google/umt5-xxl's tokenizer_config.json says (T5's tokenizer over the umt5.256000
# SentencePiece model, with t5x's 300 sentinels: `SentencePieceVocabulary(extra_ids=300)`).
UMT5_SETTINGS = {
    "tokenizer_class": "T5Tokenizer",
    "eos_token": "</s>",
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "extra_ids": 300,
}
# google/umt5-xxl's SentencePiece model is 4.5 MB: a `spiece_model` of more is no tokenizer,
# and is never read into memory.
MAX_EMBEDDED_BYTES = 64 * 2**20
BESIDE_FOLDER = "umt5-xxl"  # text_encoders/umt5-xxl/: where the refusal tells artists to look
_VOCABULARY_FILES = ("tokenizer.json", "spiece.model")
# Hugging Face cache repositories holding UMT5's tokenizer, and where in a snapshot.
_CACHED = (
    ("models--google--umt5-xxl", ""),
    ("models--Wan-AI--Wan2.*-Diffusers", "tokenizer"),
    ("models--Wan-AI--Wan2.*", "google/umt5-xxl"),  # Wan-AI's original repositories
)


@dataclass(frozen=True)
class TokenizerSource:
    folder: Path | None = None  # a tokenizer folder (transformers loads it as it is)
    embedded: Path | None = None  # a file holding `spiece_model`


def tokenizer_source(
    text_encoder: Path, caches: tuple[Path, ...] | None = None
) -> TokenizerSource | None:
    """Where the tokenizer of the UMT5 file `text_encoder` is, or None: nowhere (`caches`:
    the Hugging Face caches to look in; by default huggingface_hub's own)."""
    for folder in (text_encoder.parent / BESIDE_FOLDER, text_encoder.with_suffix("")):
        if _has_vocabulary(folder):
            return TokenizerSource(folder=folder)
    if _carries_tokenizer(text_encoder):
        return TokenizerSource(embedded=text_encoder)
    for cache in hf_cache_dirs() if caches is None else caches:
        cached = _cached_folder(cache)
        if cached is not None:
            return TokenizerSource(folder=cached)
    return None


def missing_tokenizer(text_encoder: Path) -> str:
    """Why the file cannot be used without a tokenizer (one sentence, after the model's name)."""
    where = f"{text_encoder.parent.name}/{BESIDE_FOLDER}/"
    return (
        f"{text_encoder.name} in {text_encoder.parent.name}/ carries no UMT5 tokenizer (ComfyUI's "
        f"umt5_xxl_fp16.safetensors does); put google/umt5-xxl's tokenizer files (spiece.model "
        f"or tokenizer.json) in {where}, or use a text encoder file that carries one"
    )


def damaged_tokenizer(text_encoder: Path, what: str) -> str:
    """Why the tokenizer the file carries cannot be used (one sentence, after the model's
    name): its `spiece_model` is `what`."""
    where = f"{text_encoder.parent.name}/{BESIDE_FOLDER}/"
    return (
        f"{text_encoder.name} in {text_encoder.parent.name}/ carries a damaged UMT5 tokenizer "
        f"(its spiece_model {what}); use an undamaged copy of the file, or put "
        f"google/umt5-xxl's tokenizer files (spiece.model or tokenizer.json) in {where}"
    )


def parts_problem(parts: dict[str, Part]) -> str:
    """Detection's check of a Wan file's parts: "" when its UMT5's tokenizer is found and,
    where the file carries it, its header is a SentencePiece model's."""
    umt5 = parts.get(UMT5)
    if umt5 is None:
        return ""
    source = tokenizer_source(umt5.path)
    if source is None:
        return missing_tokenizer(umt5.path)
    return embedded_problem(source.embedded) if source.embedded is not None else ""


def embedded_problem(path: Path) -> str:
    """ "" when the header's `spiece_model` in `path` can hold a SentencePiece model (bytes,
    one row, more than none and at most `MAX_EMBEDDED_BYTES`), else the sentence why not."""
    try:
        entry = read_safetensors_header(path)[EMBEDDED_KEY]
    except (ValueError, KeyError):
        return damaged_tokenizer(path, "cannot be read")
    shape = entry["shape"]  # checked by read_safetensors_header
    if entry["dtype"] != "U8" or len(shape) != 1:  # its dtype is not echoed: a stranger's text
        return damaged_tokenizer(path, "is not a row of bytes")
    if shape[0] == 0:
        return damaged_tokenizer(path, "is empty")
    if shape[0] > MAX_EMBEDDED_BYTES:
        return damaged_tokenizer(
            path, f"is {shape[0]:,} bytes, more than any SentencePiece model (UMT5's is 4.5 MB)"
        )
    return ""


def tokenizers(parts: tuple[Part, ...]) -> dict[str, Any]:
    """The pipeline's `tokenizer` for the UMT5 part among `parts` (assemble.py)."""
    umt5 = next(part for part in parts if part.kind == UMT5)
    source = tokenizer_source(umt5.path)
    if source is None:
        raise UnsupportedModel(missing_tokenizer(umt5.path))
    if source.folder is not None:
        return {"tokenizer": tokenizer_from_folder(source.folder)}
    problem = embedded_problem(umt5.path)  # the file may have changed since detection
    if problem:
        raise ModelLoadFailed(problem)
    model = embedded_model(umt5.path)
    if not _is_sentencepiece_model(model):
        raise ModelLoadFailed(damaged_tokenizer(umt5.path, "is not a SentencePiece model"))
    return {"tokenizer": tokenizer_from_model_bytes(model)}


def _is_sentencepiece_model(model: bytes) -> bool:
    """Whether `model` parses as a SentencePiece model with pieces (SentencePiece refuses
    garbage and truncated copies with an error; an empty message parses, to no pieces)."""
    import sentencepiece

    try:
        return sentencepiece.SentencePieceProcessor(model_proto=model).get_piece_size() > 0
    except RuntimeError:
        return False


def tokenizer_from_folder(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def tokenizer_from_model_bytes(model: bytes) -> Any:
    """UMT5's tokenizer from the bytes of its SentencePiece model, as transformers builds it
    from a google/umt5-xxl folder holding that model as `spiece.model`."""
    from transformers import T5Tokenizer

    with tempfile.TemporaryDirectory(prefix="easel-umt5-") as folder:
        (Path(folder) / "spiece.model").write_bytes(model)
        (Path(folder) / "tokenizer_config.json").write_text(json.dumps(UMT5_SETTINGS))
        return T5Tokenizer.from_pretrained(folder, local_files_only=True)


def embedded_model(path: Path) -> bytes:
    """The SentencePiece model ComfyUI stored in `path` (its `spiece_model` tensor's bytes)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        return bytes(handle.get_tensor(EMBEDDED_KEY).numpy().tobytes())


def _carries_tokenizer(path: Path) -> bool:
    try:
        return EMBEDDED_KEY in read_safetensors_header(path)
    except ValueError:
        return False


def _has_vocabulary(folder: Path) -> bool:
    return any((folder / name).is_file() for name in _VOCABULARY_FILES)


def _cached_folder(cache: Path) -> Path | None:
    for pattern, inside in _CACHED:
        for snapshot in sorted(cache.glob(f"{pattern}/snapshots/*")):
            folder = snapshot / inside
            if _has_vocabulary(folder):
                return folder
    return None
